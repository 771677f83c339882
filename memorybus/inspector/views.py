"""The inspector's other views: a keyed fact's timeline with as-of, the hubs'
subscriptions and cursors, maintenance status, a simulation's report.

Guarantees: a fact's timeline holds every assertion in commit order (superseded and
rejected values included, marked as such) and the value that was current at ``as_of``
(epoch seconds of commit time: what the bus held then); a subscription's ``lag`` per
scope is that scope's last committed seq minus its acknowledged cursor. A report's
plots are served only by name from the report directory's own PNG files (no paths).
"""

from __future__ import annotations

import json
import os
from typing import Any

import msgpack

from memorybus.bus.records import decode_context
from memorybus.errors import InvalidRequest
from memorybus.inspector.source import Inspector, event_json, node_json, scope_path
from memorybus.memory.events import Event, EventKind
from memorybus.scopes import Scope


def facts(insp: Inspector, within: Scope | None = None) -> list[dict[str, Any]]:
    """Every keyed fact (in ``within``) with its current value's id and its last seq."""
    from memorybus.inspector.source import inside

    out = []
    for shard, store in insp.stores:
        for scope_key, key, head, seq in store.all_slots():
            scope = Scope.from_key(scope_key)
            if inside(scope, within):
                node = store.get(head)
                out.append({"scope": list(scope.as_tuple()), "scope_path": scope_path(scope), "key": key,
                            "head": head, "seq": seq, "shard": shard, "content": node.content if node else ""})
    return sorted(out, key=lambda f: (f["scope_path"], f["key"]))


def timeline(insp: Inspector, scope: Scope, key: str, as_of: float | None = None) -> dict[str, Any]:
    """The fact ``key`` of ``scope``: its events, each value with the interval it was
    current (``current_from``, ``current_until``; None: never current / still current),
    and ``as_of_value``: the id current at ``as_of`` (default: now, the head)."""
    if not key:
        raise InvalidRequest("key", "is required")
    events: list[Event] = []
    holder = None
    for _, store in insp.stores:
        events = [Event.decode(blob, seq) for seq, blob in store.fact_events(scope.key, key)]
        if events:
            holder = store
            break
    values: dict[str, dict[str, Any]] = {}
    current: str | None = None
    for e in events:
        value = values.setdefault(e.node.id, {"id": e.node.id, "content": e.node.content,
                                              "current_from": None, "current_until": None, "outcome": ""})
        value["memory"] = node_json(e.node)  # its latest state in the log
        if e.kind is EventKind.ASSERTED:
            value["outcome"] = value["outcome"] or str(e.data.get("outcome", ""))
            if current is not None and current != e.node.id:
                values[current]["current_until"] = e.at
            if current != e.node.id:
                value["current_from"], value["current_until"] = e.at, None
            current = e.node.id
        elif e.kind is EventKind.DEPRECATED:
            if "superseded_by" in e.data:
                value["superseded_by"] = e.data["superseded_by"]
            else:
                value["outcome"] = str(e.data.get("outcome", "rejected"))
            if current == e.node.id:
                value["current_until"], current = e.at, None
        elif e.kind in (EventKind.FORGOTTEN, EventKind.ARCHIVED, EventKind.EXPIRED) and current == e.node.id:
            value["current_until"], current = e.at, None
    stored = holder.get_many(list(values)) if holder is not None else []
    for value, node in zip(values.values(), stored, strict=True):
        if node is not None:  # its state now (a superseded value is deprecated, valid_to closed)
            value["memory"] = node_json(node)
        value["status"] = value["memory"]["status"]
        value["superseded"] = bool(value.get("superseded_by")) or (
            value["current_from"] is not None and value["current_until"] is not None)
    at = as_of
    as_of_value = current if at is None else next(
        (v["id"] for v in values.values() if v["current_from"] is not None and v["current_from"] <= at
         and (v["current_until"] is None or at < v["current_until"])), None)
    return {"scope": list(scope.as_tuple()), "scope_path": scope_path(scope), "key": key,
            "events": [event_json(e) for e in events], "values": list(values.values()),
            "as_of": as_of, "as_of_value": as_of_value, "current": current}


def subscriptions(insp: Inspector) -> list[dict[str, Any]]:
    """Every stored subscription: owner, filter, push or pull, acknowledged cursors and
    the lag behind each scope's last committed seq."""
    last: dict[str, int] = {}
    for _, store in insp.stores:
        for scope_key in store.event_scopes():
            last[scope_key] = max(last.get(scope_key, 0), store.last_seq(scope_key))
    out = []
    for hub, kv in insp.hubs:
        for key, blob in kv.scan("sub:"):
            sub_id = key[4:]
            try:
                rec = msgpack.unpackb(blob, raw=False)
                owner = decode_context(rec["context"])
                raw_cur = kv.get(f"cur:{sub_id}")
                cursors = dict(msgpack.unpackb(raw_cur, raw=False)) if raw_cur else {}
            except (ValueError, TypeError, KeyError, IndexError, msgpack.UnpackException) as exc:
                out.append({"id": sub_id, "hub": hub, "error": f"unreadable record: {exc!r}"})
                continue
            rows = [{"scope_path": scope_path(Scope.from_key(sk)), "cursor": seq, "last": last.get(sk, 0),
                     "lag": max(0, last.get(sk, 0) - seq)} for sk, seq in sorted(cursors.items())]
            out.append({"id": sub_id, "hub": hub, "name": rec.get("name") or sub_id,
                        "owner": scope_path(owner.scope), "filter": rec.get("filter", {}),
                        "push": bool(rec.get("push")), "method": rec.get("method", ""), "cursors": rows,
                        "lag": sum(r["lag"] for r in rows)})
    return sorted(out, key=lambda s: (s.get("owner", ""), s.get("name", "")))


def maintenance(insp: Inspector) -> dict[str, Any]:
    """The scheduled actors' status from the running bus (``live``), else what the
    stores hold: each shard's counts by status and its meta entries."""
    shards = []
    for name, store in insp.stores:
        by_status: dict[str, int] = {}
        for node in store.iter_all():
            by_status[node.status.value] = by_status.get(node.status.value, 0) + 1
        meta = {k: v for k, v in store.meta().items() if len(v) <= 200}
        shards.append({"shard": name, "by_status": by_status, "meta": meta})
    live = insp.bus.maintenance_status() if insp.bus is not None else None
    return {"live": live, "shards": shards}


def report(insp: Inspector) -> dict[str, Any] | None:
    """The simulation report (``simulation.json``) in the report directory, the parts a
    page shows, with the names of its PNG plots; None when no report directory is set."""
    if insp.report_dir is None:
        return None
    path = os.path.join(insp.report_dir, "simulation.json")
    try:
        with open(path) as f:
            result = json.load(f)
    except (OSError, ValueError) as exc:
        raise InvalidRequest("report", f"cannot read {path}: {exc}") from None
    keep = ("run", "world", "accuracy", "staleness", "conflicts", "integrity", "latency_ms", "faults")
    shown = {k: result.get(k) for k in keep}
    if isinstance(shown.get("staleness"), dict):  # the raw per-answer lists are what the plots show
        shown["staleness"] = {k: v for k, v in shown["staleness"].items() if not isinstance(v, list)}
    return {**shown, "series_points": len(result.get("series") or []), "plots": plots(insp)}


def plots(insp: Inspector) -> list[str]:
    if insp.report_dir is None or not os.path.isdir(insp.report_dir):
        return []
    return sorted(n for n in os.listdir(insp.report_dir)
                  if n.endswith(".png") and os.path.isfile(os.path.join(insp.report_dir, n)))


def plot_path(insp: Inspector, name: str) -> str | None:
    """The file of the plot ``name`` (one of :func:`plots`), else None."""
    if insp.report_dir is None or name not in plots(insp):
        return None
    return os.path.join(insp.report_dir, name)
