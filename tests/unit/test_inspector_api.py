"""The inspector's JSON API (starlette's TestClient, no browser, no Ray) over a data
directory written by the real Shard: every data route refuses a request without the
operator's credential, an agent's credential or a forged one; the views show the
scope tree, full-text search, a fact's superseded value and its as-of, subscriptions
with cursors and lag, the report with its plot; the directory is never written."""

from __future__ import annotations

import hashlib
import os

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient

from memorybus.auth import KeyRing, open_keys
from memorybus.auth.credential import Grant
from memorybus.config import Config
from memorybus.inspector.app import create_app
from memorybus.inspector.guard import COOKIE, OperatorGuard
from memorybus.inspector.readonly import close_all, open_data_dir
from memorybus.inspector.source import Inspector
from tests.inspector_data import REGION, T0, build, write_report

ROUTES = ["/api/overview", "/api/scopes", "/api/memories", "/api/memory/x", "/api/facts", "/api/fact?org=acme&key=k",
          "/api/subscriptions", "/api/maintenance", "/api/report", "/api/report/plots/accuracy.png"]


def _digest(data_dir) -> dict[str, str]:
    out = {}
    for root, _, files in os.walk(data_dir):
        for name in files:
            path = os.path.join(root, name)
            if name.startswith("auth.sqlite") or name.endswith("-shm"):
                continue  # the key ring; SQLite's shared-memory index a WAL reader needs
            with open(path, "rb") as f:
                data = f.read()
            if name.endswith("-wal") and not data:
                continue  # an empty log a read-only WAL reader opens: no write in it
            out[path] = hashlib.sha256(data).hexdigest()
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("inspector")
    data_dir = root / "data"
    made = build(data_dir)
    write_report(root / "report")
    before = _digest(data_dir)
    cfg = Config(data_dir=str(data_dir))
    guard = OperatorGuard.for_config(cfg)
    stores, hubs = open_data_dir(str(data_dir))
    insp = Inspector(stores, hubs, report_dir=str(root / "report"), source=str(data_dir))
    client = TestClient(create_app(insp, guard))
    yield {"client": client, "guard": guard, "made": made, "cfg": cfg, "data_dir": data_dir, "before": before}
    close_all([s for _, s in stores] + [h for _, h in hubs])


def _get(site, path, **params):
    r = site["client"].get(path, params=params, headers={"Authorization": f"Bearer {site['guard'].token}"})
    assert r.status_code == 200, r.text
    return r.json()


def test_every_data_route_refuses_a_request_without_the_operator_credential(site):
    client = site["client"]
    kv = open_keys(site["cfg"])
    try:
        ring = KeyRing.load(kv)
        org_key = ring.ensure("acme")
        agent = Grant(org="acme", user="alice", agent="planner", issued=T0, expires=4e9, kid=org_key.kid)
        agent_token = agent.sign(org_key.secret)
        op_key = ring.current("__operator__") or ring.ensure("__operator__")
    finally:
        kv.close()
    forged = Grant(org="__operator__", operator=True, issued=T0, expires=4e9, kid=op_key.kid).sign(b"x" * 32)
    expired = Grant(org="__operator__", operator=True, issued=T0, expires=T0 + 1, kid=op_key.kid).sign(op_key.secret)
    for path in ROUTES:
        for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": "Bearer nonsense"},
                        {"Authorization": f"Bearer {agent_token}"}, {"Authorization": f"Bearer {forged}"},
                        {"Authorization": f"Bearer {expired}"}, {"Authorization": f"Basic {site['guard'].token}"}):
            r = client.get(path, headers=headers)
            assert r.status_code == 401, (path, headers, r.status_code)
            assert "Alice" not in r.text and "eu-west" not in r.text and "PNG" not in r.text
    with TestClient(client.app, cookies={COOKIE: agent_token}) as with_cookie:
        assert all(with_cookie.get(path).status_code == 401 for path in ROUTES)
    # the page itself holds no data; it loads without a token
    page = client.get("/")
    assert page.status_code == 200 and "memorybus inspector" in page.text
    assert "Alice" not in page.text and "default-src 'none'" in page.headers["content-security-policy"]


def test_login_sets_a_cookie_only_for_the_operator_token(site):
    with TestClient(site["client"].app) as fresh:
        assert fresh.post("/api/login", json={"token": "wrong"}).status_code == 401
        assert COOKIE not in fresh.cookies
        assert fresh.get("/api/overview").status_code == 401
        r = fresh.post("/api/login", json={"token": site["guard"].token})
        assert r.status_code == 200
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert fresh.get("/api/overview").json()["memories"] == 6
        fresh.post("/api/logout")
        assert fresh.get("/api/overview").status_code == 401


def test_a_secret_token_guard_accepts_that_token_only():
    guard = OperatorGuard.secret()
    assert guard.allows(guard.token)
    assert not guard.allows(guard.token[:-1]) and not guard.allows("") and not guard.allows(None)


def test_scope_tree_counts_each_scope_and_everything_inside_it(site):
    tree = _get(site, "/api/scopes")
    assert tree["total"] == 6
    (acme,) = tree["children"]
    assert (acme["name"], acme["count"], acme["total"]) == ("acme", 3, 6)  # 1 episode + 2 fact values in the org
    alice = next(c for c in acme["children"] if c["name"] == "alice")
    assert (alice["count"], alice["total"]) == (1, 2)
    session = alice["children"][0]["children"][0]
    assert session["fields"] == {"org": "acme", "user": "alice", "agent": "planner", "session": "s1"}


def test_full_text_search_and_filters(site):
    found = _get(site, "/api/memories", q="green teas")  # stemmed: "teas" finds "tea"
    assert [m["content"] for m in found["memories"]] == ["Alice prefers green tea in the morning"]
    assert _get(site, "/api/memories", q="green coffee")["total"] == 0  # every keyword must occur
    within_bob = _get(site, "/api/memories", org="acme", user="bob", q="test")
    assert [m["scope_path"] for m in within_bob["memories"]] == ["acme/bob/coder"]
    deprecated = _get(site, "/api/memories", status="deprecated")
    assert [m["content"] for m in deprecated["memories"]] == [REGION[0][1]]
    keyed = _get(site, "/api/memories", key_prefix="deploy.")
    assert keyed["total"] == 2
    assert _get(site, "/api/memories", limit=1)["total"] == 6 and len(_get(site, "/api/memories", limit=1)[
        "memories"]) == 1


@pytest.mark.parametrize(("params", "field"), [({"limit": "0"}, "limit"), ({"limit": "x"}, "limit"),
                                               ({"kind": "dream"}, "kind"), ({"user": "bob"}, "org"),
                                               ({"mode": "psychic"}, "mode")])
def test_bad_filters_answer_400_naming_the_field(site, params, field):
    r = site["client"].get("/api/memories", params=params,
                           headers={"Authorization": f"Bearer {site['guard'].token}"})
    assert r.status_code == 400 and field in r.json()["error"]


def test_semantic_search_without_a_bus_says_what_it_needs(site):
    r = site["client"].get("/api/memories", params={"q": "tea", "mode": "semantic", "org": "acme"},
                           headers={"Authorization": f"Bearer {site['guard'].token}"})
    assert r.status_code == 400 and "running bus" in r.json()["error"]


def test_fact_timeline_shows_the_superseded_value_and_answers_as_of(site):
    made = site["made"]
    t = _get(site, "/api/fact", org="acme", key="deploy.region")
    assert [e["kind"] for e in t["events"]][:1] == ["asserted"]
    values = {v["id"]: v for v in t["values"]}
    old, new = values[made["superseded"]], values[made["current"]]
    assert old["superseded"] and old["status"] == "deprecated" and old["content"] == REGION[0][1]
    assert old["current_until"] == new["current_from"] == T0 + 7200 + REGION[1][0]
    assert not new["superseded"] and new["current_until"] is None
    assert t["as_of_value"] == made["current"]
    between = _get(site, "/api/fact", org="acme", key="deploy.region", as_of=str(T0 + 7200 + 10))
    assert between["as_of_value"] == made["superseded"]
    before = _get(site, "/api/fact", org="acme", key="deploy.region", as_of=str(T0))
    assert before["as_of_value"] is None
    facts = _get(site, "/api/facts", org="acme")
    assert [(f["key"], f["head"]) for f in facts] == [("deploy.region", made["current"])]


def test_memory_detail_and_unknown_id(site):
    made = site["made"]
    d = _get(site, f"/api/memory/{made['current']}")
    assert d["memory"]["content"] == REGION[1][1] and len(d["fact_events"]) >= 2
    r = site["client"].get("/api/memory/nope", headers={"Authorization": f"Bearer {site['guard'].token}"})
    assert r.status_code == 404


def test_subscriptions_show_cursors_and_lag(site):
    (sub,) = _get(site, "/api/subscriptions")
    assert (sub["owner"], sub["name"], sub["push"]) == ("acme/alice/planner", "facts", False)
    (cur,) = sub["cursors"]
    assert cur["scope_path"] == "acme" and cur["cursor"] == 1 and cur["lag"] == cur["last"] - 1 > 0


def test_maintenance_without_a_bus_shows_the_stores(site):
    m = _get(site, "/api/maintenance")
    assert m["live"] is None and m["shards"][0]["by_status"] == {"active": 5, "deprecated": 1}


def test_report_and_its_plots_by_name_only(site):
    r = _get(site, "/api/report")
    assert r["run"]["id"] == "run-7" and r["plots"] == ["accuracy.png"] and r["series_points"] == 3
    headers = {"Authorization": f"Bearer {site['guard'].token}"}
    png = site["client"].get("/api/report/plots/accuracy.png", headers=headers)
    assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"
    for name in ("simulation.json", "..%2Fdata%2Fshard-0%2Frecords.sqlite", "missing.png"):
        assert site["client"].get(f"/api/report/plots/{name}", headers=headers).status_code == 404


def test_the_data_directory_is_never_written(site):
    _get(site, "/api/memories", q="tea")
    _get(site, "/api/fact", org="acme", key="deploy.region")
    assert _digest(site["data_dir"]) == site["before"]


def test_readonly_store_refuses_writes(site):
    from memorybus.errors import StoreUnavailable

    stores, hubs = open_data_dir(str(site["data_dir"]))
    try:
        with pytest.raises(StoreUnavailable):
            stores[0][1].set_meta({"x": "y"})
    finally:
        close_all([s for _, s in stores] + [h for _, h in hubs])


def test_cli_refuses_a_missing_data_dir_and_warns_on_a_public_bind(tmp_path, capsys):
    from memorybus.cli import main
    from memorybus.inspector.cli import plaintext_warning

    assert main(["ui", "--data-dir", str(tmp_path / "absent")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "absent").exists()
    assert plaintext_warning("127.0.0.1", False) is None and plaintext_warning("::1", False) is None
    assert "plaintext" in (plaintext_warning("0.0.0.0", False) or "")
    assert plaintext_warning("0.0.0.0", True) is None
