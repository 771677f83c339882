"""The inspector's page in a real headless Chromium (Debian's ``chromium``, driven by
Playwright through ``executable_path``; one browser launch), served by uvicorn on
loopback over a data directory the real Shard wrote: without the token the page shows
only its login form; with it the page renders the scope tree, a search returns the
expected memory, and the fact timeline shows the superseded value and answers as-of.
Screenshots are saved under the test's tmp dir and checked (size, not blank, the
timeline's colours)."""

from __future__ import annotations

import shutil
import socket
import threading
import time

import pytest

sync_api = pytest.importorskip("playwright.sync_api")
uvicorn = pytest.importorskip("uvicorn")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")

from PIL import Image  # noqa: E402

from memorybus.config import Config  # noqa: E402
from memorybus.inspector.app import create_app  # noqa: E402
from memorybus.inspector.guard import OperatorGuard  # noqa: E402
from memorybus.inspector.readonly import close_all, open_data_dir  # noqa: E402
from memorybus.inspector.source import Inspector  # noqa: E402
from tests.inspector_data import REGION, build, write_report  # noqa: E402

W, H = 1280, 800
expect = sync_api.expect


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check_shot(path, size) -> Image.Image:
    img = Image.open(path).convert("RGB")
    assert img.size == size
    colours = img.getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 20  # text, tables, the header: not a blank page
    return img


def _has(img: Image.Image, rgb: tuple[int, int, int], tol: int = 12, least: int = 20) -> bool:
    n = sum(c for c, px in img.getcolors(maxcolors=1 << 20) or []
            if all(abs(a - b) <= tol for a, b in zip(px, rgb, strict=True)))
    return n >= least


def test_page_in_headless_chromium(tmp_path):
    data_dir = tmp_path / "data"
    made = build(data_dir)
    write_report(tmp_path / "report")
    guard = OperatorGuard.for_config(Config(data_dir=str(data_dir)))
    stores, hubs = open_data_dir(str(data_dir))
    insp = Inspector(stores, hubs, report_dir=str(tmp_path / "report"), source=str(data_dir))
    port = _port()
    server = uvicorn.Server(uvicorn.Config(create_app(insp, guard), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    assert server.started
    base = f"http://127.0.0.1:{port}"
    shots = tmp_path / "shots"
    shots.mkdir()
    requests: list[str] = []
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            try:
                # no token: the login form, no data
                stranger = browser.new_page(viewport={"width": W, "height": H})
                stranger.goto(base + "/")
                stranger.wait_for_selector("#login-form", state="visible")
                assert stranger.is_hidden("#app") and "Alice" not in stranger.content()
                stranger.fill("[data-testid=token]", "not-the-token")
                stranger.click("#login-form button")
                expect(stranger.locator("#login-error")).to_contain_text("not the operator's")
                assert "Alice" not in stranger.content()
                stranger.close()

                page = browser.new_page(viewport={"width": W, "height": H})
                page.on("request", lambda r: requests.append(r.url))
                page.goto(f"{base}/#token={guard.token}")
                page.wait_for_selector("#memories tbody tr")
                assert "#token" not in page.url  # the fragment is cleared once used
                assert "6 memories" in page.inner_text("[data-testid=overview]")
                tree = page.inner_text("[data-testid=scope-tree]")
                assert "acme" in tree and "alice" in tree and "bob" in tree
                page.screenshot(path=str(shots / "overview.png"))
                _check_shot(shots / "overview.png", (W, H))

                page.fill("[data-testid=search]", "green tea")
                page.click("#search-form button")
                expect(page.locator("[data-testid=mem-summary]")).to_contain_text("1 memories")
                rows = page.locator("#memories tbody tr")
                assert rows.count() == 1 and "Alice prefers green tea" in rows.first.inner_text()
                page.screenshot(path=str(shots / "search.png"))
                _check_shot(shots / "search.png", (W, H))

                page.click("#tabs button[data-tab=facts]")
                page.click("li.fact[data-key='deploy.region']")
                page.wait_for_selector("#values tbody tr.superseded")
                old = page.locator(f"#values tbody tr[data-id='{made['superseded']}']")
                assert "superseded" in old.get_attribute("class") and REGION[0][1] in old.inner_text()
                assert "superseded" in old.locator(".superseded-tag").inner_text()
                new = page.locator(f"#values tbody tr[data-id='{made['current']}']")
                assert "asof-current" in new.get_attribute("class")
                assert REGION[1][1] in page.inner_text("[data-testid=as-of-text]")
                page.locator("[data-testid=timeline]").screenshot(path=str(shots / "timeline.png"))
                img = _check_shot(shots / "timeline.png", Image.open(shots / "timeline.png").size)
                assert _has(img, (0xD9, 0x82, 0x5B)) and _has(img, (0x33, 0xAA, 0x77))  # superseded, current dots

                # as of a moment between the two assertions: the old value was current
                page.locator("[data-testid=as-of]").fill("500")  # fires input and change
                expect(page.locator("[data-testid=as-of-text]")).to_contain_text(REGION[0][1])
                assert "asof-current" in page.locator(
                    f"#values tbody tr[data-id='{made['superseded']}']").get_attribute("class")
                page.screenshot(path=str(shots / "as_of.png"))
                _check_shot(shots / "as_of.png", (W, H))

                page.click("#tabs button[data-tab=report]")
                plot = page.locator(".plots img")
                expect(plot).to_have_count(1)
                # the PNG arrives after the element: wait for it, not for a fixed time
                page.wait_for_function("() => { const i = document.querySelector('.plots img');"
                                       " return i !== null && i.complete && i.naturalWidth > 0; }")
                box = plot.bounding_box()
                assert box is not None and box["width"] > 50 and box["height"] > 20  # the PNG loaded
                page.click("#tabs button[data-tab=subscriptions]")
                page.wait_for_selector("#subs tbody tr")
                assert "acme/alice/planner" in page.inner_text("[data-testid=subscriptions]")
            finally:
                browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        close_all([s for _, s in stores] + [h for _, h in hubs])
    assert requests and all(u.startswith(base) for u in requests)  # nothing from the network
