"""Protection: who may call (API keys, OIDC, the default A2A access), built from the settings."""

from __future__ import annotations

from persona_agent.errors import ConfigError
from persona_agent.security.api_keys import ApiKeys
from persona_agent.security.authentication import Authenticator
from persona_agent.settings import Settings

__all__ = ["build_authenticator"]


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
