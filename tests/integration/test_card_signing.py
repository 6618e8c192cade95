"""Signed agent cards: with a signing key, every persona's card carries a JWS signature that
the SDK's verifier accepts, with the key the hub publishes; a changed card fails it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from a2a.client import A2ACardResolver
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt import PyJWK

from persona_agent.api.app import create_app
from persona_agent.errors import ConfigError
from persona_agent.settings import Settings
from tests.integration.conftest import HubFactory


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def pem(key: Any, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


KEYS = {
    "ES256": lambda: ec.generate_private_key(ec.SECP256R1()),
    "RS256": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
    "EdDSA": ed25519.Ed25519PrivateKey.generate,
}


@pytest.mark.parametrize("algorithm", sorted(KEYS))
async def test_every_card_is_signed_and_verifies(
    hub_factory: HubFactory, tmp_path: Path, algorithm: str
) -> None:
    key_file = pem(KEYS[algorithm](), tmp_path / "card.pem")
    async with hub_factory(card_signing_key=key_file, card_signing_key_id="k1") as hub:
        jwks = (await hub.http.get("/.well-known/jwks.json")).json()
        (jwk,) = jwks["keys"]
        assert (jwk["kid"], jwk["alg"]) == ("k1", algorithm)
        assert "d" not in jwk  # the public half only
        fetched: list[tuple[str | None, str | None]] = []
        jwks_url = f"{hub.settings.base_url}/.well-known/jwks.json"
        published = {jwks_url: (await hub.http.get(jwks_url)).json()["keys"]}

        def key_provider(kid: str | None, jku: str | None) -> PyJWK:
            # The SDK calls it synchronously, so the key set was fetched beforehand.
            fetched.append((kid, jku))
            assert jku is not None
            return PyJWK({**next(k for k in published[jku] if k["kid"] == kid)})

        verify = create_signature_verifier(key_provider, [algorithm])
        for persona_id in ("socrates", "ada-lovelace"):
            resolver = A2ACardResolver(hub.http, f"{hub.settings.base_url}/a2a/{persona_id}")
            card = await resolver.get_agent_card(signature_verifier=verify)
            assert len(card.signatures) == 1
            # The strict 1.0 form (docs/a2a.md#card-forms) carries the same signature.
            strict = await resolver.get_agent_card(
                signature_verifier=verify, http_kwargs={"headers": {"A2A-Version": "1.0"}}
            )
            assert strict == card
        assert fetched[0] == ("k1", f"{hub.settings.base_url}/.well-known/jwks.json")

        card.description = "A forged description."
        with pytest.raises(InvalidSignaturesError):
            verify(card)


async def test_without_a_key_cards_are_unsigned(hub_factory: HubFactory) -> None:
    async with hub_factory() as hub:
        assert (await hub.http.get("/.well-known/jwks.json")).status_code == 404
        card = (await hub.http.get("/a2a/socrates/.well-known/agent-card.json")).json()
        assert "signatures" not in card


def test_a_bad_signing_key_stops_start_up(personas_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key", encoding="utf-8")
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, personas_dir=personas_dir, data_dir=tmp_path, card_signing_key=bad
    )
    with pytest.raises(ConfigError, match=f"Card signing key {bad}: not a PEM private key"):
        create_app(settings)
