// memorybus inspector: a read-only page over the inspector's JSON API (no build step,
// nothing loaded from the network). Text from the bus is set with textContent only.
"use strict";
const state = { within: {}, fact: null };
const $ = (sel) => document.querySelector(sel);

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c ?? "")));
  return e;
}
function svg(tag, attrs = {}, text) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
const stamp = (t) => (t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) : "-");

async function api(path, params = {}) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") qs.append(k, v);
  const res = await fetch(path + (qs.toString() ? "?" + qs : ""), { credentials: "same-origin" });
  if (res.status === 401) { showLogin(); throw new Error("not authenticated"); }
  const body = await res.json();
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

function showLogin(message) {
  $("#app").hidden = true; $("#logout").hidden = true; $("#login").hidden = false;
  $("#login-error").textContent = message || "";
}

async function login(token) {
  const res = await fetch("/api/login", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ token }), credentials: "same-origin" });
  return res.ok;
}

async function start() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) { history.replaceState(null, "", location.pathname); await login(decodeURIComponent(m[1])); }
  try { await loadAll(); } catch (e) { if (String(e.message) !== "not authenticated") throw e; }
}

async function loadAll() {
  const o = await api("/api/overview");
  $("#login").hidden = true; $("#app").hidden = false; $("#logout").hidden = false;
  $("#overview").textContent = `${o.source} · ${o.memories} memories · ${o.facts} facts · ${o.shards.length} shards` +
    (o.semantic ? " · semantic search on" : " · full-text search (no bus: semantic off)");
  if (!o.semantic) $("#mode").querySelector("option[value=semantic]").disabled = true;
  renderTree(await api("/api/scopes"));
  await searchMemories();
}

function renderTree(root) {
  const tree = $("#tree"); tree.replaceChildren();
  const item = (n, label) => {
    const li = el("li");
    const span = el("span", { class: "scope", "data-scope": JSON.stringify(n.fields) }, label,
      el("span", { class: "count" }, ` ${n.total}`));
    span.addEventListener("click", () => selectScope(n.fields, span));
    li.append(span);
    if (n.children.length) li.append(el("ul", {}, ...n.children.map((c) => item(c, c.name))));
    return li;
  };
  tree.append(el("ul", {}, item(root, "everything")));
}

function selectScope(fields, span) {
  state.within = fields;
  document.querySelectorAll(".scope.selected").forEach((s) => s.classList.remove("selected"));
  span.classList.add("selected");
  $("#within-path").textContent = Object.values(fields).map((v) => v || "*").join("/") || "everything";
  refreshTab();
}

async function searchMemories() {
  const params = { ...state.within, q: $("#q").value, mode: $("#mode").value, kind: $("#kind").value,
    status: $("#status").value, key_prefix: $("#key-prefix").value, limit: 200 };
  let r;
  try { r = await api("/api/memories", params); } catch (e) { $("#mem-summary").textContent = e.message; return; }
  $("#mem-summary").textContent = `${r.total} memories (${r.mode})`;
  const body = $("#memories tbody"); body.replaceChildren();
  for (const m of r.memories) {
    const tr = el("tr", { "data-id": m.id, class: m.status === "deprecated" ? "superseded" : "" },
      el("td", {}, stamp(m.created_at)), el("td", {}, m.scope_path), el("td", {}, m.kind),
      el("td", {}, m.status), el("td", {}, m.key || ""), el("td", { class: "content" }, m.content));
    tr.addEventListener("click", async () => {
      const d = await api("/api/memory/" + encodeURIComponent(m.id));
      $("#memory-detail").textContent = JSON.stringify(d, null, 1);
    });
    body.append(tr);
  }
}

async function loadFacts() {
  const list = $("#fact-list"); list.replaceChildren();
  for (const f of await api("/api/facts", state.within)) {
    const li = el("li", { class: "fact", "data-key": f.key }, el("b", {}, f.key), ` (${f.scope_path}): ${f.content}`);
    li.addEventListener("click", () => showFact(f.scope, f.key));
    list.append(li);
  }
}

async function showFact(scope, key, asOf) {
  const [org, user, agent, session] = scope;
  const t = await api("/api/fact", { org, user, agent, session, key, as_of: asOf });
  state.fact = { scope, key, t };
  $("#timeline").hidden = false;
  $("#fact-title").textContent = `${key} in ${t.scope_path}`;
  const times = t.events.map((e) => e.at);
  const lo = Math.min(...times), hi = Math.max(...times), span = Math.max(hi - lo, 1);
  const x = (at) => 90 + ((at - lo) / span) * 540;
  const g = $("#timeline-svg"); g.replaceChildren(svg("line", { x1: 20, y1: 45, x2: 700, y2: 45, stroke: "#889" }));
  const superseded = new Set(t.values.filter((v) => v.superseded).map((v) => v.id));
  for (const e of t.events) {
    const lost = e.kind === "deprecated" || superseded.has(e.memory.id);
    g.append(svg("circle", { cx: x(e.at), cy: 45, r: 7, fill: lost ? "#d9825b" : "#3a7" },
      undefined), svg("text", { x: x(e.at), y: lost ? 80 : 25, "text-anchor": "middle", "font-size": 11 },
      `${e.kind} ${stamp(e.at).slice(5, 16)}`));
  }
  const shownAt = asOf ?? hi;
  g.append(svg("line", { x1: x(Math.min(Math.max(shownAt, lo), hi)), y1: 10, x2: x(Math.min(Math.max(shownAt, lo), hi)),
    y2: 80, stroke: "#23304a", "stroke-dasharray": "3 3", id: "as-of-marker" }));
  const slider = $("#as-of");
  slider.value = String(Math.round(((shownAt - lo) / span) * 1000));
  slider.onchange = () => showFact(scope, key, lo + (Number(slider.value) / 1000) * span);
  const current = t.values.find((v) => v.id === t.as_of_value);
  $("#as-of-text").textContent = `${stamp(shownAt)}: ${current ? current.content : "(no value yet)"}`;
  const body = $("#values tbody"); body.replaceChildren();
  for (const v of t.values) {
    const cls = [v.superseded ? "superseded" : "", v.id === t.as_of_value ? "asof-current" : ""].join(" ");
    body.append(el("tr", { class: cls, "data-id": v.id },
      el("td", {}, v.content, " ", v.superseded ? el("span", { class: "tag superseded-tag" }, "superseded") : ""),
      el("td", {}, stamp(v.current_from)), el("td", {}, stamp(v.current_until)), el("td", {}, v.status)));
  }
}

async function loadSubscriptions() {
  const body = $("#subs tbody"); body.replaceChildren();
  for (const s of await api("/api/subscriptions")) {
    const cursors = (s.cursors || []).map((c) => `${c.scope_path}: ${c.cursor} / ${c.last} (lag ${c.lag})`).join("; ");
    body.append(el("tr", {}, el("td", {}, s.owner || ""), el("td", {}, s.name || s.id), el("td", {}, s.push ? "push" : "pull"),
      el("td", {}, JSON.stringify(s.filter || s.error)), el("td", {}, cursors)));
  }
}

async function loadMaintenance() {
  const m = await api("/api/maintenance");
  const box = $("#maint"); box.replaceChildren();
  box.append(el("h3", {}, m.live ? "Scheduled maintenance (live from the bus)" : "No running bus: what the stores hold"));
  if (m.live) box.append(el("pre", {}, JSON.stringify(m.live, null, 1)));
  for (const s of m.shards) box.append(el("p", {}, `${s.shard}: ` +
    Object.entries(s.by_status).map(([k, v]) => `${v} ${k}`).join(", ")));
}

async function loadReport() {
  const r = await api("/api/report");
  const box = $("#report"); box.replaceChildren();
  if (!r) { box.append(el("p", {}, "No report: start with --report DIR (a simulation's output directory).")); return; }
  box.append(el("h3", {}, `run ${r.run?.id ?? ""}: ${r.run?.ops ?? 0} ops in ${r.run?.seconds ?? 0} s`));
  box.append(el("pre", {}, JSON.stringify({ accuracy: r.accuracy, staleness: r.staleness, integrity: r.integrity,
    latency_ms: r.latency_ms }, null, 1)));
  const plots = el("div", { class: "plots" });
  for (const name of r.plots) plots.append(el("img", { src: "/api/report/plots/" + encodeURIComponent(name), alt: name }));
  box.append(plots);
}

const loaders = { memories: searchMemories, facts: loadFacts, subscriptions: loadSubscriptions,
  maintenance: loadMaintenance, report: loadReport };
let tab = "memories";
function refreshTab() { return loaders[tab](); }

document.addEventListener("DOMContentLoaded", () => {
  $("#login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (await login($("#token").value.trim())) { $("#token").value = ""; await loadAll(); }
    else showLogin("That token is not the operator's.");
  });
  $("#logout").addEventListener("click", async () => { await fetch("/api/logout", { method: "POST" }); showLogin(); });
  $("#search-form").addEventListener("submit", (ev) => { ev.preventDefault(); searchMemories(); });
  document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => {
    document.querySelectorAll("#tabs button").forEach((x) => x.classList.toggle("active", x === b));
    tab = b.dataset.tab;
    document.querySelectorAll(".tab").forEach((s) => { s.hidden = s.id !== "tab-" + tab; });
    refreshTab();
  }));
  start();
});
