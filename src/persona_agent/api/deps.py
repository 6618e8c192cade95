"""Dependencies of the REST API: the store, the base URL, and API-key auth."""

from __future__ import annotations

import hmac
import ipaddress
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from persona_agent.personas.store import FilePersonaStore

__all__ = ["ApiAuth", "Reader", "Store", "Writer", "is_loopback"]


class ApiAuth:
    """API keys for ``/api/v1``, compared in constant time.

    With keys configured every route needs one (``Authorization: Bearer KEY`` or
    ``X-API-Key: KEY``), else 401. With none, reads are open and writes are
    accepted only from loopback clients (403 otherwise).
    """

    def __init__(self, keys: list[str]) -> None:
        self._keys = [key.encode() for key in keys]

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def _presented(self, request: Request) -> bytes | None:
        header = request.headers.get("authorization", "")
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() == "bearer" and credentials.strip():
            return credentials.strip().encode()
        key = request.headers.get("x-api-key", "").strip()
        return key.encode() if key else None

    def check(self, request: Request, *, write: bool) -> None:
        if not self._keys:
            if write and not is_loopback(request.client.host if request.client else None):
                raise HTTPException(
                    status.HTTP_403_FORBIDDEN,
                    "Writes are accepted only from loopback clients while no API keys are "
                    "configured (set PERSONA_AGENT_API_KEYS)",
                )
            return
        presented = self._presented(request)
        # compare_digest with every key, so the time taken says nothing about which matched
        matched = False
        for key in self._keys:
            matched |= presented is not None and hmac.compare_digest(presented, key)
        if not matched:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "A valid API key is required (Authorization: Bearer KEY, or X-API-Key: KEY)",
                headers={"WWW-Authenticate": "Bearer"},
            )


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _auth(request: Request) -> ApiAuth:
    auth: ApiAuth = request.app.state.api_auth
    return auth


def require_read(request: Request) -> None:
    _auth(request).check(request, write=False)


def require_write(request: Request) -> None:
    _auth(request).check(request, write=True)


def get_store(request: Request) -> FilePersonaStore:
    store: FilePersonaStore = request.app.state.persona_store
    return store


Store = Annotated[FilePersonaStore, Depends(get_store)]
Reader = Depends(require_read)
Writer = Depends(require_write)
