"""The Lua scripts of :class:`~memorybus.storage.redis.RedisStore` (each runs atomically
on the server; every key a script names carries the shard's hash tag, so each touches
one Redis Cluster slot)."""

# ARGV[1]: msgpack array of ops; ARGV[2]: key prefix; ARGV[3]: operation id or "";
# ARGV[4]: the operation's answer; ARGV[5]: this attempt; ARGV[6]: retention in ms.
# The operation record (hash ":o:<op>": r = answer, q = event seqs, f<attempt> = fenced)
# is checked first and written last, in the same script as the batch.
# put:  {"put", id, blob, version, ac, la, scope_key, fact_key_or_""}
# cas:  {"cas", id, blob, expected}
# del:  {"del", id, "", expected_or_-1}
# slot: {"slot", scope_key, key, expected_seq, head_id, count, evidence_or_""}: the evidence is
#       field "e" of the slot's hash, written with it ("" leaves it)
# evt:  {"evt", scope_key, blob, fact_key_or_""}
# aud:  {"aud", org, expected_head, new_head, entry_blob...}: audit entries chained in
#       Python after ``expected_head`` ("seq hash", "" for none); refused whole
#       ({'audit', org}) when the head moved, so the caller re-chains and retries.
COMMIT = """
local ops = cmsgpack.unpack(ARGV[1])
local p = ARGV[2]
local ok = nil
if ARGV[3] ~= '' then
  ok = p .. ':o:' .. ARGV[3]
  local r = redis.call('HGET', ok, 'r')
  if r then
    redis.call('PEXPIRE', ok, ARGV[6])  -- a write, so that a WAIT after it confirms the record's replication
    return {'done', r, redis.call('HGET', ok, 'q')}
  end
  if redis.call('HEXISTS', ok, 'f' .. ARGV[5]) == 1 then return {'fenced'} end
end
local seen = {}
for _, op in ipairs(ops) do
  if op[1] == 'aud' then
    if (redis.call('GET', p .. ':ah:' .. op[2]) or '') ~= op[3] then return {'audit', op[2]} end
  elseif op[1] == 'slot' then
    local cur = tonumber(redis.call('HGET', p .. ':h:' .. op[2] .. '\\31' .. op[3], 'q') or '0')
    if cur ~= op[4] then return {'conflict', op[3] .. '@' .. op[2], op[4], cur} end
  elseif op[1] ~= 'evt' then
    local nk = p .. ':n:' .. op[2]
    local v = redis.call('HGET', nk, 'v')
    if op[1] == 'put' then
      if v and redis.call('HGET', nk, 'd') ~= op[3] then
        return {'conflict', op[2], 0, tonumber(v)}
      end
      local first = seen[op[2]]
      if first and first[3] ~= op[3] then return {'conflict', op[2], 0, first[4]} end
      seen[op[2]] = op
    else
      if not v then return {'missing', op[2]} end
      if op[4] >= 0 and tonumber(v) ~= op[4] then
        return {'conflict', op[2], op[4], tonumber(v)}
      end
      if op[1] == 'del' then  -- read before any write: in a moving cluster slot a missing key stops here
        local s = redis.call('HGET', nk, 's')
        redis.call('EXISTS', p .. ':s:' .. s)
        local k = redis.call('HGET', nk, 'k')
        if k and k ~= '' then redis.call('EXISTS', p .. ':k:' .. s .. '\\31' .. k) end
      end
    end
  end
end
local out = {'ok'}
for _, op in ipairs(ops) do
  local nk = p .. ':n:' .. op[2]
  if op[1] == 'put' then
    if redis.call('EXISTS', nk) == 0 then
      redis.call('HSET', nk, 'v', op[4], 'd', op[3], 'ac', op[5], 'la', op[6],
                 's', op[7], 'k', op[8])
      redis.call('SADD', p .. ':all', op[2])
      redis.call('SADD', p .. ':s:' .. op[7], op[2])
      if op[8] ~= '' then redis.call('SADD', p .. ':k:' .. op[7] .. '\\31' .. op[8], op[2]) end
    end
  elseif op[1] == 'cas' then
    redis.call('HSET', nk, 'v', op[4] + 1, 'd', op[3])
  elseif op[1] == 'del' then
    local s = redis.call('HGET', nk, 's')
    local k = redis.call('HGET', nk, 'k')
    redis.call('DEL', nk)
    redis.call('SREM', p .. ':all', op[2])
    redis.call('SREM', p .. ':s:' .. s, op[2])
    if k and k ~= '' then redis.call('SREM', p .. ':k:' .. s .. '\\31' .. k, op[2]) end
  elseif op[1] == 'slot' then
    redis.call('HSET', p .. ':h:' .. op[2] .. '\\31' .. op[3], 'q', op[4] + op[6], 'id', op[5])
    if op[7] ~= '' then redis.call('HSET', p .. ':h:' .. op[2] .. '\\31' .. op[3], 'e', op[7]) end
  elseif op[1] == 'aud' then
    for i = 5, #op do redis.call('RPUSH', p .. ':a:' .. op[2], op[i]) end
    redis.call('SET', p .. ':ah:' .. op[2], op[4])
  end
end
for _, op in ipairs(ops) do
  if op[1] == 'evt' then
    local seq = redis.call('INCR', p .. ':q:' .. op[2])
    redis.call('XADD', p .. ':x:' .. op[2], seq .. '-1', 'e', op[3])
    if op[4] ~= '' then redis.call('RPUSH', p .. ':f:' .. op[2] .. '\\31' .. op[4], seq) end
    table.insert(out, seq)
  end
end
if ok then
  local seqs = {}
  for i = 2, #out do seqs[#seqs + 1] = out[i] end
  redis.call('HSET', ok, 'r', ARGV[4], 'q', cmsgpack.pack(seqs))
  redis.call('PEXPIRE', ok, ARGV[6])
end
return out
"""

# KEYS[1]: the operation record; ARGV[1]: the attempt to fence; ARGV[2]: retention in ms.
# Found done, its expiry is renewed: a write, so that a WAIT after it covers the record.
RESOLVE = """
local r = redis.call('HGET', KEYS[1], 'r')
if r then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {'done', r, redis.call('HGET', KEYS[1], 'q')}
end
redis.call('HSET', KEYS[1], 'f' .. ARGV[1], '1')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {'fenced'}
"""

TOUCH = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'ac', ARGV[1])
  local la = tonumber(redis.call('HGET', KEYS[1], 'la'))
  if tonumber(ARGV[2]) > la then redis.call('HSET', KEYS[1], 'la', ARGV[2]) end
end
return 1
"""
