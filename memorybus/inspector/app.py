"""The inspector's ASGI app: a JSON API over an :class:`Inspector`, and the page.

Every ``/api/*`` route but ``/api/login`` answers 401 unless the request carries an
operator credential (see :mod:`memorybus.inspector.guard`); the page itself
(``/`` and ``/static/*``: HTML, JS, CSS, no data) loads without one and shows a login
form. Nothing is loaded from the network. The API is read-only: every data route is
a GET. Bad input answers 400 with the error's message, an unknown memory 404.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from memorybus.errors import InvalidRequest, MemoryBusError, MemoryNotFound
from memorybus.inspector import views
from memorybus.inspector.guard import COOKIE, OperatorGuard, request_token
from memorybus.inspector.source import Inspector, parse_scope

STATIC = os.path.join(os.path.dirname(__file__), "static")
_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
#: the page may load its own files only: no CDN, no inline script
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")

Handler = Callable[[Request], Any]
T = TypeVar("T")
D = TypeVar("D")


def _parsed(value: str | None, name: str, parse: Callable[[str], T], default: D, what: str) -> T | D:
    """A query parameter read with ``parse`` (``default`` when absent or empty);
    InvalidRequest naming it when it is not ``what``."""
    if value in (None, ""):
        return default
    try:
        return parse(value)
    except ValueError:
        raise InvalidRequest(name, f"{value!r} is not {what}") from None


def create_app(insp: Inspector, guard: OperatorGuard) -> Starlette:
    """The app serving ``insp`` to whoever ``guard`` allows."""

    def api(fn: Callable[[Request], Any]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            if not guard.allows(request_token(request.headers, request.cookies)):
                return JSONResponse({"error": "not authenticated: the operator's token is needed"}, 401,
                                    headers={**_HEADERS, "WWW-Authenticate": "Bearer"})
            from starlette.concurrency import run_in_threadpool

            try:
                result = await run_in_threadpool(fn, request)
            except MemoryNotFound as exc:
                return JSONResponse({"error": str(exc)}, 404, headers=_HEADERS)
            except MemoryBusError as exc:
                return JSONResponse({"error": str(exc)}, 400, headers=_HEADERS)
            if isinstance(result, Response):
                return result
            return JSONResponse(result, headers=_HEADERS)

        return endpoint

    def scope_of(request: Request) -> Any:
        return parse_scope(dict(request.query_params))

    def memories(request: Request) -> Any:
        q = request.query_params
        text, mode = q.get("q", ""), q.get("mode", "fulltext")
        limit = _parsed(q.get("limit"), "limit", int, 100, "an integer")
        if mode == "semantic" and text.strip():
            return insp.semantic(text, scope_of(request), min(limit, 50))
        if mode not in ("fulltext", "semantic"):
            raise InvalidRequest("mode", "must be fulltext or semantic")
        return insp.memories(within=scope_of(request), kinds=q.getlist("kind"), statuses=q.getlist("status"),
                             key_prefix=q.get("key_prefix", ""), text=text, limit=limit)

    def fact(request: Request) -> Any:
        scope = scope_of(request)
        if scope is None:
            raise InvalidRequest("org", "a fact lives in a scope: org is required")
        as_of = _parsed(request.query_params.get("as_of"), "as_of", float, None, "a number (epoch seconds)")
        return views.timeline(insp, scope, request.query_params.get("key", ""), as_of)

    def plot(request: Request) -> Response:
        path = views.plot_path(insp, request.path_params["name"])
        if path is None:
            return JSONResponse({"error": "no such plot"}, 404, headers=_HEADERS)
        return FileResponse(path, media_type="image/png", headers=_HEADERS)

    async def login(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            body = None
        token = body.get("token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not guard.allows(token.strip()):
            return JSONResponse({"error": "that token is not the operator's"}, 401, headers=_HEADERS)
        response = JSONResponse({"ok": True}, headers=_HEADERS)
        response.set_cookie(COOKIE, token.strip(), httponly=True, samesite="strict", path="/",
                            secure=request.url.scheme == "https")
        return response

    async def logout(request: Request) -> Response:
        response = JSONResponse({"ok": True}, headers=_HEADERS)
        response.delete_cookie(COOKIE, path="/")
        return response

    async def page(request: Request) -> Response:
        return FileResponse(os.path.join(STATIC, "index.html"), media_type="text/html",
                            headers={**_HEADERS, "Content-Security-Policy": CSP})

    routes = [
        Route("/", page),
        Route("/api/login", login, methods=["POST"]),
        Route("/api/logout", logout, methods=["POST"]),
        Route("/api/overview", api(lambda r: insp.overview())),
        Route("/api/scopes", api(lambda r: insp.scopes())),
        Route("/api/memories", api(memories)),
        Route("/api/memory/{memory_id}", api(lambda r: insp.memory(r.path_params["memory_id"]))),
        Route("/api/facts", api(lambda r: views.facts(insp, scope_of(r)))),
        Route("/api/fact", api(fact)),
        Route("/api/subscriptions", api(lambda r: views.subscriptions(insp))),
        Route("/api/maintenance", api(lambda r: views.maintenance(insp))),
        Route("/api/report", api(lambda r: views.report(insp))),
        Route("/api/report/plots/{name}", api(plot)),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes)
