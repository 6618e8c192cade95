"""Tests of what the hub refuses (docs/security.md), most against a real ``serve``."""

OFFLINE_LLM = {"LLM_BASE_URL": "http://127.0.0.1:9/v1", "LLM_API_KEY": "unused"}
"""Settings of a hub whose persona doors are tested: an LLM server it never calls."""

UPLOAD = {"X-Requested-With": "tests"}
"""The header a keyless upload needs (any value; no web page's form can send it)."""
