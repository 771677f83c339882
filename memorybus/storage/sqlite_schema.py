"""The tables of a SqliteStore file (see :mod:`memorybus.storage.sqlite`); erasure jobs' table is
:data:`memorybus.storage.scrub.JOBS_SCHEMA`."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    id TEXT PRIMARY KEY,
    scope_key TEXT NOT NULL,
    mkey TEXT,
    version INTEGER NOT NULL,
    access_count INTEGER NOT NULL,
    last_accessed REAL NOT NULL,
    blob BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS nodes_scope ON nodes(scope_key);
CREATE INDEX IF NOT EXISTS nodes_key ON nodes(scope_key, mkey) WHERE mkey IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS slots (
    scope_key TEXT NOT NULL, mkey TEXT NOT NULL, head TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (scope_key, mkey)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS slot_evidence (
    scope_key TEXT NOT NULL, mkey TEXT NOT NULL, blob BLOB NOT NULL, PRIMARY KEY (scope_key, mkey)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS seqs (scope_key TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    scope_key TEXT NOT NULL, seq INTEGER NOT NULL, blob BLOB NOT NULL,
    PRIMARY KEY (scope_key, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ops (op TEXT PRIMARY KEY, at REAL NOT NULL, result BLOB NOT NULL, seqs BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS ops_at ON ops(at);
CREATE TABLE IF NOT EXISTS fact_events (
    scope_key TEXT NOT NULL, mkey TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (scope_key, mkey, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audit (
    org TEXT NOT NULL, seq INTEGER NOT NULL, blob BLOB NOT NULL, PRIMARY KEY (org, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audit_heads (org TEXT PRIMARY KEY, seq INTEGER NOT NULL, hash TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audit_checkpoints (
    org TEXT NOT NULL, seq INTEGER NOT NULL, blob BLOB NOT NULL, PRIMARY KEY (org, seq)
) WITHOUT ROWID;
"""
