"""Credentials for calls to agents outside the hub: an API key, a bearer token, or an OAuth 2
access token got with client credentials and kept until it expires.

:class:`AgentCredentials` is an a2a-sdk client interceptor: it puts the credential on every
request the SDK client makes. It is not the SDK's ``AuthInterceptor`` because that one sends
a credential only when the card *requires* a scheme it fits; an agent whose public card
requires nothing may still serve a configured caller differently (its own limits, the
personas its key may see), so the configured credential always goes, where the card's
matching scheme says (the API-key header it names) or else in the usual place.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable
from urllib.parse import quote_plus

import httpx
from a2a.client import ClientCallInterceptor
from a2a.client.client import ClientCallContext
from a2a.client.interceptors import AfterArgs, BeforeArgs
from a2a.types.a2a_pb2 import AgentCard

from persona_agent.collab.agents_file import AgentAuth, OAuth2ClientCredentials

__all__ = ["AgentCredentials", "ClientCredentialsToken", "CredentialError"]

DEFAULT_API_KEY_HEADER = "X-API-Key"
UNKNOWN_LIFETIME = 60.0
"""Seconds a token whose response gives no ``expires_in`` is kept."""
EXPIRY_MARGIN = 30.0
"""A token is renewed this long before it expires (or at 90 % of a shorter life)."""


class CredentialError(Exception):
    """No credential could be had; ``transient``: the token endpoint may answer later
    (no connection, 429, 5xx), else it refused (4xx: wrong client id or secret)."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient


class ClientCredentialsToken:
    """An OAuth 2 access token by the client credentials grant, fetched when first needed
    and again when it is about to expire; one request at a time, however many calls wait."""

    def __init__(
        self,
        config: OAuth2ClientCredentials,
        http: httpx.AsyncClient,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.http = http
        self._clock = clock
        self._token: str | None = None
        self._renew_at = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> str:
        """The access token.

        Raises:
            CredentialError: the token endpoint could not be reached or refused.
        """
        async with self._lock:
            if self._token is None or self._clock() >= self._renew_at:
                self._token, lifetime = await self._fetch()
                margin = min(EXPIRY_MARGIN, lifetime * 0.1)
                self._renew_at = self._clock() + lifetime - margin
            return self._token

    def forget(self) -> None:
        """Drop the token (the agent refused it): the next call asks for a new one."""
        self._token = None

    async def _fetch(self) -> tuple[str, float]:
        config = self.config
        form = {"grant_type": "client_credentials"}
        if config.scopes:
            form["scope"] = " ".join(config.scopes)
        if config.audience:
            form["audience"] = config.audience
        secret = config.client_secret.get_secret_value()
        headers = {"Accept": "application/json"}
        if config.client_auth == "basic":  # each part form-encoded first (RFC 6749, 2.3.1)
            pair = f"{quote_plus(config.client_id)}:{quote_plus(secret)}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form.update(client_id=config.client_id, client_secret=secret)
        where = f"the token endpoint {config.token_url}"
        try:
            response = await self.http.post(
                config.token_url,
                data=form,
                headers=headers,
            )
        except httpx.HTTPError as error:
            raise CredentialError(f"{where} did not answer ({error!r})", transient=True) from None
        if response.status_code != 200:
            transient = response.status_code == 429 or response.status_code >= 500
            raise CredentialError(
                f"{where} answered {response.status_code}: {_oauth_error(response)}",
                transient=transient,
            )
        try:
            body = response.json()
            token = body["access_token"]
            lifetime = float(body.get("expires_in") or UNKNOWN_LIFETIME)
        except (ValueError, KeyError, TypeError):
            raise CredentialError(f"{where} gave no access_token", transient=False) from None
        if not isinstance(token, str) or not token:
            raise CredentialError(f"{where} gave no access_token", transient=False)
        return token, max(lifetime, 1.0)


class AgentCredentials(ClientCallInterceptor):
    """Adds the configured credential to every request of the SDK client."""

    def __init__(
        self,
        auth: AgentAuth,
        http: httpx.AsyncClient,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.auth = auth
        self.token = (
            ClientCredentialsToken(auth.oauth2, http, clock=clock)
            if auth.oauth2 is not None
            else None
        )

    async def header(self, card: AgentCard) -> tuple[str, str]:
        """The header that carries the credential to the agent of ``card``.

        Raises:
            CredentialError: no OAuth 2 token could be had.
        """
        if self.auth.api_key is not None:
            name = self.auth.header or _api_key_header(card) or DEFAULT_API_KEY_HEADER
            return name, self.auth.api_key.get_secret_value()
        if self.auth.bearer is not None:
            return "Authorization", f"Bearer {self.auth.bearer.get_secret_value()}"
        assert self.token is not None  # the config has exactly one credential
        return "Authorization", f"Bearer {await self.token.get()}"

    async def before(self, args: BeforeArgs) -> None:
        name, value = await self.header(args.agent_card)
        if args.context is None:
            args.context = ClientCallContext()
        if args.context.service_parameters is None:
            args.context.service_parameters = {}
        args.context.service_parameters[name] = value

    async def after(self, args: AfterArgs) -> None:
        return None


def _api_key_header(card: AgentCard) -> str | None:
    """The header of the card's API-key scheme: a required one first."""
    required = [name for requirement in card.security_requirements for name in requirement.schemes]
    names = [*required, *card.security_schemes]
    for name in names:
        scheme = card.security_schemes.get(name)
        if scheme is None or not scheme.HasField("api_key_security_scheme"):
            continue
        api_key = scheme.api_key_security_scheme
        if api_key.location.lower() == "header" and api_key.name:
            return api_key.name
    return None


def _oauth_error(response: httpx.Response) -> str:
    """The OAuth error of a refusal (``invalid_client: ...``), never the request's secrets."""
    try:
        body = response.json()
    except ValueError:
        return response.reason_phrase or "no reason given"
    if not isinstance(body, dict):
        return response.reason_phrase or "no reason given"
    error = str(body.get("error") or response.reason_phrase or "error")
    description = body.get("error_description")
    return f"{error}: {description}" if description else error
