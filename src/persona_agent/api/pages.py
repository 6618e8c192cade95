"""The hub's pages for people: the web console, the API docs, and the root.

- ``/console/``: the console's static files (``api/console/``: HTML, CSS and ES modules, no
  build step). It is an ordinary client of the hub: it calls the same A2A and REST endpoints
  as any other, with the key its user gives, so it adds no route and no privilege.
- ``/docs`` and ``/redoc``: FastAPI's Swagger UI and ReDoc pages, with their files served by
  the hub (the ``fastapi-offline`` package ships them) instead of FastAPI's default CDN, so
  the docs work on a machine without internet access and a page of the hub loads nothing
  from another host.
- ``/``: the console (a redirect), or, with the console off, a page of links.
"""

from __future__ import annotations

import html
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from persona_agent.a2a.calls import AI_CATALOG_LINK, catalog_link
from persona_agent.a2a.cards import A2A_PREFIX, CARD_PATH
from persona_agent.a2a.registry import A2ARegistry

__all__ = ["CONSOLE_FILES", "CONSOLE_PATH", "DOCS_FILES", "add_pages"]

CONSOLE_PATH = "/console"
CONSOLE_FILES = Path(__file__).parent / "console"
"""The console's files, shipped in the package."""
DOCS_PATH = "/docs"
DOCS_STATIC_PATH = "/docs/static"
DOCS_FILES = Path(fastapi_offline.__file__).parent / "static"
"""Swagger UI 5 (it reads OpenAPI 3.1, which FastAPI writes) and ReDoc, from fastapi-offline."""

CONSOLE_HEADERS = [
    # Scripts, styles, images and requests of the hub's own origin only: a persona's text
    # is shown as text, and even markup slipped into it could load or run nothing.
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; "
        b"object-src 'none'; "
        b"base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    # Revalidated on every load (an ETag answers 304): a new version of the hub is seen at
    # once, never a page of one version with the scripts of another.
    (b"cache-control", b"no-cache"),
    (b"link", AI_CATALOG_LINK.encode()),  # where the hub's agents are listed for machines
]


DOCS_POLICY = (
    # Swagger UI starts from an inline script; both put styles inline; ReDoc searches in a
    # worker made from a blob. Nothing is fetched from another host: ReDoc's sidebar shows
    # Redocly's logo from its CDN, which this keeps the browser from requesting.
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


class _WithHeaders:
    """ASGI middleware: these headers on every response of the app it wraps."""

    def __init__(self, app: ASGIApp, headers: list[tuple[bytes, bytes]]) -> None:
        self.app = app
        self.headers = headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.headers]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def add_pages(app: FastAPI, registry: A2ARegistry, *, console: bool) -> None:
    """Add the docs, the root, and (when ``console``) the console to ``app``, whose own
    ``docs_url`` and ``redoc_url`` must be None (they would load their files from a CDN)."""
    openapi_path = app.openapi_url or "/openapi.json"

    @app.get(DOCS_PATH, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = _root_path(request)
        return _docs_page(
            get_swagger_ui_html(
                openapi_url=root + openapi_path,
                title=f"{app.title} - Swagger UI",
                swagger_js_url=f"{root}{DOCS_STATIC_PATH}/swagger-ui-bundle.js",
                swagger_css_url=f"{root}{DOCS_STATIC_PATH}/swagger-ui.css",
                swagger_favicon_url=f"{root}{DOCS_STATIC_PATH}/favicon.png",
                oauth2_redirect_url=f"{root}{DOCS_PATH}/oauth2-redirect",
                # No badge of swagger.io's online validator (an image from its host).
                swagger_ui_parameters={"validatorUrl": None},
            )
        )

    @app.get(f"{DOCS_PATH}/oauth2-redirect", include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = _root_path(request)
        return _docs_page(
            get_redoc_html(
                openapi_url=root + openapi_path,
                title=f"{app.title} - ReDoc",
                redoc_js_url=f"{root}{DOCS_STATIC_PATH}/redoc.standalone.js",
                redoc_favicon_url=f"{root}{DOCS_STATIC_PATH}/favicon.png",
                with_google_fonts=False,
            )
        )

    app.router.routes.append(
        Mount(DOCS_STATIC_PATH, app=StaticFiles(directory=DOCS_FILES), name="docs-static")
    )

    if console:
        files = StaticFiles(directory=CONSOLE_FILES, html=True)
        app.router.routes.append(
            Mount(CONSOLE_PATH, app=_WithHeaders(files, CONSOLE_HEADERS), name="console")
        )

    @app.get("/", include_in_schema=False)
    async def root(request: Request) -> Response:
        """The console, or with it off a page of links (a browser pointed at the hub's
        address finds its way either way)."""
        prefix = _root_path(request)
        if console:
            page: Response = RedirectResponse(f"{prefix}{CONSOLE_PATH}/", status_code=307)
        else:
            page = HTMLResponse(_links_page(prefix, app.title, openapi_path, registry))
        catalog_link(page.headers)
        return page


def _docs_page(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = DOCS_POLICY
    return page


def _root_path(request: Request) -> str:
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")


def _links_page(prefix: str, title: str, openapi_path: str, registry: A2ARegistry) -> str:
    def link(path: str, text: str) -> str:
        return f'<a href="{html.escape(prefix + path)}">{html.escape(text)}</a>'

    personas = "\n".join(
        f"<li>{link(f'{A2A_PREFIX}/{p.id}{CARD_PATH}', p.name)}: {html.escape(p.description)}</li>"
        for p in registry.personas()
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<link rel="ai-catalog" href="{html.escape(prefix)}/.well-known/ai-catalog.json"
 type="application/ai-catalog+json">
<style>body {{ font: 16px/1.5 system-ui, sans-serif; max-width: 50rem; margin: 2rem auto;
padding: 0 1rem; }}</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
<p>A multi-persona A2A hub.</p>
<ul>
<li>{link(DOCS_PATH, "API docs")} (OpenAPI: {link(openapi_path, "openapi.json")})</li>
<li>{link(f"{A2A_PREFIX}/personas", "Personas")} (JSON)</li>
<li>{link("/.well-known/agent.json", "Every agent card")}</li>
</ul>
<h2>Agent cards</h2>
<ul>
{personas}
</ul>
</body>
</html>
"""
