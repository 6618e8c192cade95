"""Protection: who may call (API keys, OIDC, the default A2A access), their quotas, the
audit log and the cards' signer, built from the settings (the REST API's checks on them are
:class:`~persona_agent.api.rest_auth.ApiAuth`'s)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from persona_agent.errors import ConfigError
from persona_agent.security.api_keys import ApiKeys
from persona_agent.security.audit import AuditLog
from persona_agent.security.authentication import Authenticator
from persona_agent.security.card_signing import CardSigner
from persona_agent.security.quotas import QuotaLimits, Quotas
from persona_agent.settings import Settings

__all__ = ["Protection", "build_authenticator", "build_protection"]


def build_authenticator(settings: Settings) -> Authenticator:
    """API keys, the OIDC issuer and the default A2A access the settings configure.

    Raises:
        ConfigError: a malformed key entry, an issuer without an audience, or A2A access
            ``authenticated`` with no way to authenticate.
    """
    keys = ApiKeys.from_settings(settings.api_keys, settings.api_keys_file)
    oidc = None
    if settings.oidc_issuer:
        if not settings.oidc_audience:
            raise ConfigError(
                "PERSONA_AGENT_OIDC_AUDIENCE is required with PERSONA_AGENT_OIDC_ISSUER "
                "(tokens for other services must not be taken)"
            )
        # Imported only with an issuer: PyJWT and cryptography cost what a hub without pays.
        from persona_agent.security.oidc import OidcVerifier

        oidc = OidcVerifier(
            settings.oidc_issuer, settings.oidc_audience, jwks_url=settings.oidc_jwks_url
        )
    authenticator = Authenticator(keys, oidc, default_access=settings.a2a_access)
    if settings.a2a_access == "authenticated" and not authenticator.enabled:
        raise ConfigError(
            "PERSONA_AGENT_A2A_ACCESS=authenticated needs API keys (PERSONA_AGENT_API_KEYS) "
            "or an OIDC issuer (PERSONA_AGENT_OIDC_ISSUER): nobody could authenticate"
        )
    return authenticator


@dataclass
class Protection:
    """Who may call and what they may do (credentials, quotas), what is recorded (the
    audit log), and the cards' signer."""

    authenticator: Authenticator
    audit: AuditLog
    quotas: Quotas
    signer: CardSigner | None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            self.audit.close()


def build_protection(settings: Settings) -> Protection:
    authenticator = build_authenticator(settings)
    signer = (
        CardSigner.from_file(
            settings.card_signing_key, settings.card_signing_key_id, settings.base_url
        )
        if settings.card_signing_key is not None
        else None
    )
    audit = AuditLog(settings.audit_log)
    quotas = Quotas(
        QuotaLimits(
            requests_per_minute=settings.rate_limit,
            running_tasks=settings.max_running_tasks,
            open_streams=settings.max_streams,
            loopback_exempt=not settings.limit_loopback,
        )
    )
    return Protection(authenticator, audit, quotas, signer)
