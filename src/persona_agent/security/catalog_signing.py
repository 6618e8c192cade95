"""Signed AI Catalogs: Trust Manifests signed with the card signer's key, and their verifier.

The AI Catalog specification (its "Trusted Catalog", level 3) signs a Trust Manifest, not
the catalog: the manifest's ``signature`` is a detached JWS (RFC 7515, compact form, empty
payload part) over the manifest without ``signature``, canonicalized with JCS (RFC 8785).
The hub puts one on every entry, binding the entry's identifier to the SHA-256 digest of
the card it carries (``provenance[0].sourceDigest``), and one on the host, whose
provenance link ``catalogEntries`` is the digest of the ``entries`` array without the cards
(which the entries' own manifests cover): an entry added, removed or changed, or a
manifest stripped, no longer matches.

:func:`verify_catalog` checks all of it against a JWK set (the hub's
``/.well-known/jwks.json``), and raises :class:`CatalogSignatureError` naming what is
wrong. PyJWT and cryptography are imported when a signature is checked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import rfc8785

__all__ = [
    "CARD_RELATION",
    "ENTRIES_RELATION",
    "CatalogSignatureError",
    "canonical_json",
    "digest",
    "entries_digest",
    "signed_manifest",
    "verify_catalog",
]

ENTRIES_RELATION = "catalogEntries"
"""The host manifest's provenance relation whose ``sourceDigest`` covers ``entries``."""
CARD_RELATION = "publishedFrom"
"""An entry manifest's provenance relation: the card's URL and digest."""
_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "ES512", "EdDSA"})


class CatalogSignatureError(ValueError):
    """A signed catalog that does not verify; the message says where and why."""


def _plain(value: Any) -> bool:
    """Whether ``json.dumps`` writes ``value`` as JCS does: no float (JCS writes ``1.0`` as
    ``1``) and no key beyond the BMP (there code point and UTF-16 orders differ)."""
    if isinstance(value, dict):
        return all(
            isinstance(key, str) and (key.isascii() or max(key) < "\U00010000") and _plain(item)
            for key, item in value.items()
        )
    if isinstance(value, list | tuple):
        return all(_plain(item) for item in value)
    return not isinstance(value, float)


def canonical_json(value: Any) -> bytes:
    """``value`` in the JSON Canonicalization Scheme (RFC 8785): keys sorted by UTF-16 code
    units, no whitespace, numbers in their shortest form, UTF-8 (the ``rfc8785`` package).
    A card has no floats and no keys beyond the BMP, where the C JSON encoder writes the
    same bytes some 30 times faster: it takes that path."""
    if _plain(value):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return rfc8785.dumps(value)


def digest(value: Any) -> str:
    """``sha256:{hex}`` of ``value``'s canonical JSON (the specification's digest format)."""
    return "sha256:" + hashlib.sha256(canonical_json(value)).hexdigest()


def entries_digest(entries: list[Any]) -> str:
    """The digest the host's manifest carries: of every entry without its ``data`` (each
    entry's own manifest carries the digest of its ``data``, and is covered here)."""
    return digest([_without_data(entry) for entry in entries])


def _without_data(entry: Any) -> Any:
    if not isinstance(entry, dict):
        return entry
    return {key: value for key, value in entry.items() if key != "data"}


def signed_manifest(
    identity: str, provenance: list[dict[str, str]], sign: Callable[[bytes], str]
) -> dict[str, Any]:
    """A Trust Manifest for ``identity``, signed by ``sign`` (a detached compact JWS of the
    bytes it is given: :meth:`CardSigner.sign_detached`)."""
    manifest: dict[str, Any] = {"identity": identity, "provenance": provenance}
    manifest["signature"] = sign(canonical_json(manifest))
    return manifest


def verify_catalog(catalog: dict[str, Any], jwks: dict[str, Any], *, required: bool) -> bool:
    """Check a catalog's signatures against ``jwks``; True when it is signed and verifies,
    False when it carries no signature at all and ``required`` is false.

    Raises:
        CatalogSignatureError: a signature, identity or digest that does not verify, or an
            unsigned catalog (or entry) when ``required`` or when the host's manifest is
            signed (a signed catalog is signed throughout).
    """
    host = catalog.get("host")
    manifest = host.get("trustManifest") if isinstance(host, dict) else None
    if not isinstance(manifest, dict) or "signature" not in manifest:
        if required:
            raise CatalogSignatureError("the catalog is not signed (host.trustManifest.signature)")
        return False
    assert isinstance(host, dict)
    keys = _keys(jwks)
    _check_signature(manifest, keys, "host.trustManifest")
    if manifest.get("identity") != host.get("identifier"):
        raise CatalogSignatureError("host.trustManifest: its identity is not host.identifier")
    entries = catalog.get("entries")
    covered = _provenance(manifest, ENTRIES_RELATION, "host.trustManifest")
    if not isinstance(entries, list) or covered != entries_digest(entries):
        raise CatalogSignatureError(
            "entries: not the entries the host signed (added, removed or changed)"
        )
    for index, entry in enumerate(entries):
        _check_entry(entry, index, keys)
    return True


def _check_entry(entry: Any, index: int, keys: dict[str, dict[str, Any]]) -> None:
    where = f"entries[{index}]"
    if not isinstance(entry, dict):
        raise CatalogSignatureError(f"{where}: not an object")
    where = f"{where} ({entry.get('identifier')})"
    manifest = entry.get("trustManifest")
    if not isinstance(manifest, dict) or "signature" not in manifest:
        raise CatalogSignatureError(f"{where}: no signed trustManifest")
    _check_signature(manifest, keys, f"{where}.trustManifest")
    if manifest.get("identity") != entry.get("identifier"):
        raise CatalogSignatureError(f"{where}: trustManifest.identity is not its identifier")
    if "data" in entry and _provenance(manifest, CARD_RELATION, where) != digest(entry["data"]):
        raise CatalogSignatureError(f"{where}: its data is not the card that was signed")


def _provenance(manifest: dict[str, Any], relation: str, where: str) -> str | None:
    links = manifest.get("provenance")
    for link in links if isinstance(links, list) else []:
        if isinstance(link, dict) and link.get("relation") == relation:
            found = link.get("sourceDigest")
            return found if isinstance(found, str) else None
    raise CatalogSignatureError(f"{where}: no provenance link '{relation}'")


def _keys(jwks: dict[str, Any]) -> dict[str, dict[str, Any]]:
    keys = jwks.get("keys") if isinstance(jwks, dict) else None
    if not isinstance(keys, list):
        raise CatalogSignatureError("the key set has no 'keys' list")
    return {key["kid"]: key for key in keys if isinstance(key, dict) and "kid" in key}


def _check_signature(manifest: dict[str, Any], keys: dict[str, dict[str, Any]], where: str) -> None:
    import jwt

    signature = manifest["signature"]
    payload = canonical_json({k: v for k, v in manifest.items() if k != "signature"})
    if not isinstance(signature, str) or signature.count(".") != 2:
        raise CatalogSignatureError(f"{where}: the signature is not a compact JWS")
    try:
        header = jwt.get_unverified_header(signature)
    except jwt.PyJWTError as error:
        raise CatalogSignatureError(f"{where}: the signature is not a JWS ({error})") from None
    kid, algorithm = header.get("kid"), header.get("alg")
    if algorithm not in _ALGORITHMS:
        raise CatalogSignatureError(f"{where}: the signature's algorithm {algorithm!r} is refused")
    if kid not in keys:
        raise CatalogSignatureError(
            f"{where}: signed with the key {kid!r}, which the key set does not hold"
        )
    try:
        key = jwt.PyJWK(keys[kid], algorithm=algorithm)
        jwt.PyJWS().decode_complete(
            signature, key, algorithms=[algorithm], detached_payload=payload
        )
    except jwt.PyJWTError as error:
        raise CatalogSignatureError(f"{where}: the signature does not verify ({error})") from None
