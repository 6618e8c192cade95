"""Who may use ``/api/v1``: its credentials and scopes, and the rules a keyless write keeps.

:class:`ApiAuth` is the REST API's door check (the routes name it through the dependencies
of :mod:`persona_agent.api.deps`); the decisions themselves are the one authorization of
:mod:`persona_agent.security.authorization`, and every refusal is in the audit log.
"""

from __future__ import annotations

import ipaddress
from typing import Literal, NoReturn

from fastapi import HTTPException, Request, status

from persona_agent.security.audit import AuditLog, request_id_of
from persona_agent.security.authentication import Authenticator
from persona_agent.security.authorization import Action
from persona_agent.security.principal import AuthError, Principal

__all__ = ["SOURCE_MEDIA_TYPES", "UPLOAD_HEADER", "ApiAuth", "is_loopback"]

UPLOAD_HEADER = "X-Requested-With"
"""What a keyless upload must carry (any value), unless it comes from the hub's own origin:
a header no HTML form can send, and that a page of another origin cannot add without a
CORS preflight, which the hub never grants."""


class ApiAuth:
    """Who may use ``/api/v1``.

    With API keys or an OIDC issuer configured every route needs a credential
    (``Authorization: Bearer ...`` or ``X-API-Key: KEY``), else 401, and its principal
    needs the scope ``personas:read`` or ``personas:write`` (the memory routes:
    ``memory:read`` or ``memory:write``; 403 without). With
    neither, reads are open and writes are accepted
    only when every one of these holds (403 otherwise, 415 for a JSON route's body
    that is not labelled JSON), so that no web page open in a local browser can
    write (docs/security.md):

    - the hub listens on a loopback address (behind a local reverse proxy every
      client looks like loopback, so a hub reachable from elsewhere needs keys);
    - the client is a loopback address;
    - the ``Host`` header names a loopback host (DNS rebinding sends the attacker's name);
    - an ``Origin`` header, if sent, is the hub's own origin (browsers send it with
      every cross-origin ``POST``, form posts included);
    - a JSON route's body is labelled ``application/json`` (a form cannot send that
      cross-origin without a CORS preflight, which the hub never grants);
    - an upload (multipart, as a form sends it) carries :data:`UPLOAD_HEADER` or the
      hub's own ``Origin``: a browser that sends no ``Origin`` (an old one, a privacy
      setting or an extension that strips it) would otherwise let any page upload.
    """

    def __init__(
        self,
        authenticator: Authenticator,
        *,
        listen_host: str = "127.0.0.1",
        allowed_origins: list[str] | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        self._auth = authenticator
        self._audit = audit if audit is not None else AuditLog()
        self._origins = {origin.lower() for origin in allowed_origins or []}
        self._listens_on_loopback = is_loopback(listen_host)
        self._listen_host = listen_host

    @property
    def enabled(self) -> bool:
        return self._auth.enabled

    @property
    def listens_on_loopback(self) -> bool:
        """The hub listens on a loopback address only (decided once, from ``listen_host``)."""
        return self._listens_on_loopback

    @property
    def open_to_this_machine(self) -> bool:
        """Nobody can authenticate and the hub listens on loopback: keyless writes are
        taken from this machine (see the class), and the Host guard checks every request's
        ``Host`` (:mod:`~persona_agent.security.ingress.host_guard`)."""
        return self._listens_on_loopback and not self._auth.enabled

    async def check(
        self, request: Request, *, write: bool, action: Action | None = None
    ) -> Principal | None:
        """The caller, if it may use ``/api/v1`` for ``action`` (default: ``READ``, or
        ``WRITE`` for a ``write``); else a 401 or 403, recorded in the audit log."""
        try:
            return await self._check(request, write=write, action=action)
        except HTTPException as error:
            self._refused(request, error)
            raise

    def _refused(self, request: Request, error: HTTPException) -> None:
        """A 401 or 403, in the audit log."""
        if error.status_code in (401, 403):
            self._audit.record(
                "auth.refused",
                principal=None,
                outcome=str(error.status_code),
                request_id=request_id_of(dict(request.headers)),
                path=request.url.path,
                reason=str(error.detail),
            )

    async def _check(
        self, request: Request, *, write: bool, action: Action | None
    ) -> Principal | None:
        """The caller (``None`` without authentication configured), or an HTTP error.

        A write that a browser sends (it has an ``Origin``) must come from the hub's own
        origin or one of ``PERSONA_AGENT_CORS_ORIGINS``, with or without credentials."""
        if write:
            self._check_write_origin(request)
        if not self._auth.enabled:
            return None
        try:
            principal = await self._auth.principal(request.scope["headers"])
            if action is None:
                action = Action.WRITE if write else Action.READ
            self._auth.authorization.check(principal, action)
        except AuthError as error:
            raise self._http_error(error) from None
        return principal

    def check_write_origin(self, request: Request) -> None:
        """Where a write may come from (a browser's ``Origin``; without keys, the keyless
        write rules: see the class), and nothing else: for a route whose caller and rights
        another part decides (a turn the REST API starts is admitted as an A2A call). A
        refusal is a 403 or 415, recorded in the audit log."""
        try:
            self._check_write_origin(request)
        except HTTPException as error:
            self._refused(request, error)
            raise

    def _check_write_origin(self, request: Request) -> None:
        origin = request.headers.get("origin")
        if origin is not None and self._auth.enabled:
            host = request.headers.get("host", "")
            own = {f"http://{host}".lower(), f"https://{host}".lower()}
            if origin.lower() not in own | self._origins:
                _forbid(
                    f"Writes are refused from the origin '{origin[:100]}' (set "
                    "PERSONA_AGENT_CORS_ORIGINS to allow a web application's origin)"
                )
        if not self._auth.enabled:
            self._check_keyless_write(request)

    def authorize(
        self,
        request: Request,
        action: Action,
        persona_id: str | None = None,
        *,
        caller: str | None = None,
    ) -> Principal | None:
        """The request's principal (:meth:`check` found it), if it may do ``action`` on
        ``persona_id`` (``caller``: whose memory, for the memory actions); else a 403
        (recorded in the audit log).

        Raises:
            HTTPException: 401 or 403.
        """
        principal: Principal | None = getattr(request.state, "principal", None)
        refused = self._auth.authorization.refusal(principal, action, persona_id, caller=caller)
        if refused is None:
            return principal
        self._audit.record(
            "auth.refused",
            principal=principal.name if principal is not None else None,
            persona=persona_id,
            outcome=str(refused.status),
            request_id=request_id_of(dict(request.headers)),
            path=request.url.path,
            reason=refused.message,
        )
        raise self._http_error(refused)

    def visible(self, request: Request, persona_ids: list[str]) -> list[str]:
        """Those of ``persona_ids`` the request's principal may read."""
        principal: Principal | None = getattr(request.state, "principal", None)
        return self._auth.authorization.visible(principal, persona_ids)

    def _http_error(self, error: AuthError) -> HTTPException:
        headers = {"WWW-Authenticate": self._auth.challenge(error)}
        return HTTPException(
            error.status, error.message, headers=headers if error.status == 401 else None
        )

    def _check_keyless_write(self, request: Request) -> None:
        if not self._listens_on_loopback:
            _forbid(
                f"Writes need an API key: the hub listens on {self._listen_host}, not only on "
                "loopback (set PERSONA_AGENT_API_KEYS)"
            )
        if not is_loopback(request.client.host if request.client else None):
            _forbid(
                "Writes are accepted only from loopback clients while no API keys are "
                "configured (set PERSONA_AGENT_API_KEYS)"
            )
        host = request.headers.get("host", "")
        # Stricter than security/ingress/host_guard.py's Host rule, which also lets through the
        # public base URL's host, PERSONA_AGENT_ALLOWED_HOSTS and names under localhost:
        # a keyless write names a loopback host, whatever else the hub answers to.
        if not is_loopback(_hostname(host)):
            _forbid(
                f"Writes without an API key need a loopback Host header, not '{host[:100]}' "
                "(set PERSONA_AGENT_API_KEYS)"
            )
        origin = request.headers.get("origin")
        if origin is not None and origin.lower() not in (f"http://{host}", f"https://{host}"):
            _forbid(
                f"Writes without an API key are refused from another origin ('{origin[:100]}'); "
                "set PERSONA_AGENT_API_KEYS"
            )
        if request.method not in ("POST", "PUT", "PATCH"):
            return
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if request.url.path.endswith("/file"):
            if media not in SOURCE_MEDIA_TYPES:  # none a form can send
                raise HTTPException(
                    status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
                    "The body must be a persona file, labelled Content-Type: "
                    "application/yaml or application/json",
                )
        elif request.url.path.endswith(_FILE_PATHS):
            # A multipart upload is what a form sends: it needs what a form cannot send.
            if origin is None and not request.headers.get(UPLOAD_HEADER):
                _forbid(
                    f"An upload without an API key needs an {UPLOAD_HEADER} header (any "
                    "value: a web page's form cannot send one) or the hub's own Origin; "
                    "set PERSONA_AGENT_API_KEYS"
                )
        elif media != "application/json":
            raise HTTPException(
                status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
                "The body must be JSON, labelled Content-Type: application/json",
            )


SOURCE_MEDIA_TYPES: dict[str, Literal["yaml", "json"]] = {
    "application/yaml": "yaml",
    "application/x-yaml": "yaml",
    "text/yaml": "yaml",
    "application/json": "json",
}
"""The media types of a persona file's text (``PUT .../file``), and the format of each."""

_FILE_PATHS = ("/upload", "/validate", "/documents", "/conversations/import")
"""Routes that take a file as a form sends it (multipart)."""


def _forbid(message: str) -> NoReturn:
    raise HTTPException(status.HTTP_403_FORBIDDEN, message)


def _hostname(host: str) -> str:
    """The host of a ``Host`` header, without its port (``[::1]:8000`` → ``::1``)."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() == "localhost"
