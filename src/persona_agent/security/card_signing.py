"""Signed agent cards (A2A 1.0 card signatures), with the SDK's signing helpers.

With ``PERSONA_AGENT_CARD_SIGNING_KEY`` (a PEM private key: RSA, EC P-256/P-384, or
Ed25519), every persona's card carries a JWS signature over its canonical form
(``a2a.utils.signing``). The protected header names the key (``kid``) and where its public
half is published (``jku``: the hub's ``/.well-known/jwks.json``), so a client can verify
the card with the SDK's ``create_signature_verifier``.

The signing libraries (the SDK's signing module, PyJWT, cryptography) are imported when a
signer is made, so a hub that signs nothing does not load them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from persona_agent.errors import ConfigError

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import AgentCard
    from a2a.utils.signing import ProtectedHeader

__all__ = ["JWKS_PATH", "CardSigner"]

JWKS_PATH = "/.well-known/jwks.json"
"""Where the hub publishes the public key of its card signatures."""


class CardSigner:
    """Signs cards with one private key; publishes its public key as a JWK set."""

    def __init__(self, private_key: Any, key_id: str, base_url: str) -> None:
        from a2a.utils.signing import create_agent_card_signer
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
        from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

        if isinstance(private_key, rsa.RSAPrivateKey):
            self.algorithm, jwk = "RS256", RSAAlgorithm.to_jwk(private_key.public_key(), True)
        elif isinstance(private_key, ec.EllipticCurvePrivateKey):
            curve = private_key.curve.name
            algorithms = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
            if curve not in algorithms:
                raise ConfigError(f"Card signing key: the curve {curve} is not supported")
            self.algorithm = algorithms[curve]
            jwk = ECAlgorithm.to_jwk(private_key.public_key(), True)
        elif isinstance(private_key, ed25519.Ed25519PrivateKey):
            self.algorithm, jwk = "EdDSA", OKPAlgorithm.to_jwk(private_key.public_key(), True)
        else:
            raise ConfigError("Card signing key: an RSA, EC or Ed25519 private key is needed")
        self.key_id = key_id
        self.jwk: dict[str, Any] = {**jwk, "kid": key_id, "use": "sig", "alg": self.algorithm}
        header: ProtectedHeader = {
            "kid": key_id,
            "alg": self.algorithm,
            "jku": f"{base_url}{JWKS_PATH}",
            "typ": "JOSE",
        }
        self._sign = create_agent_card_signer(private_key, header)
        self._key, self._header = private_key, header

    @classmethod
    def from_file(cls, path: Path, key_id: str, base_url: str) -> CardSigner:
        """The signer of a PEM private key file (unencrypted).

        Raises:
            ConfigError: the file cannot be read or holds no usable private key.
        """
        from cryptography.hazmat.primitives import serialization

        try:
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except OSError as error:
            raise ConfigError(f"Card signing key {path}: {error.strerror}") from None
        except (ValueError, TypeError) as error:
            raise ConfigError(f"Card signing key {path}: not a PEM private key ({error})") from None
        return cls(key, key_id, base_url)

    def sign(self, card: AgentCard) -> AgentCard:
        """``card`` with a signature added (the card is changed in place)."""
        return self._sign(card)

    def sign_detached(self, payload: bytes) -> str:
        """A detached JWS of ``payload`` (compact, empty payload part), with the cards'
        header (``kid``, ``jku``): an AI Catalog's Trust Manifest signature."""
        import jwt

        headers = {"kid": self.key_id, "jku": self._header["jku"], "typ": "JOSE"}
        return jwt.PyJWS().encode(
            payload, self._key, self.algorithm, headers=headers, is_payload_detached=True
        )

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.jwk]}
