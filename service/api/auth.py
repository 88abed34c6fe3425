"""API keys mapped to tenants (`RAG_API_KEYS='key1:tenantA,key2:tenantB'`): over HTTP the caller's key is the
only thing the server can trust, so it decides the tenant (no or unknown key: 401; another tenant's
`tenant_id`: 403). Without keys the API is open. Keys are compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from persistence.vector_store import validate_collection_name
from service.api.errors import ApiError

API_KEY_HEADER = "X-API-Key"


def parse_api_keys(raw: str) -> dict[str, str]:
    """`key:tenant` pairs separated by commas; raises ValueError naming the malformed entry's position."""
    keys: dict[str, str] = {}
    for position, entry in enumerate((part.strip() for part in raw.split(",")), start=1):
        if not entry:
            continue
        key, separator, tenant = entry.partition(":")
        if not separator or not key.strip() or not tenant.strip():
            raise ValueError(f"RAG_API_KEYS entry {position} is not 'key:tenant'")
        keys[key.strip()] = validate_collection_name(tenant.strip(), "tenant")
    return keys


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key in a request's headers: `X-API-Key`, or `Authorization: Bearer <key>` (headers only, so the
    request guard checks it before the body is read)."""
    key = headers.get(API_KEY_HEADER)
    if key:
        return key.strip()
    scheme, _, token = headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def key_tenant(keys: dict[str, str], key: str | None) -> str | None:
    """The tenant of a key (None when keys are not configured); ApiError 401 for a missing/unknown key."""
    if not keys:
        return None
    if not key:
        raise ApiError(401, "Unauthorized", f"missing API key: send the {API_KEY_HEADER} header")
    for known, tenant in keys.items():
        if hmac.compare_digest(known.encode(), key.encode()):
            return tenant
    raise ApiError(401, "Unauthorized", "unknown API key")


def resolve_tenant(authorized: str | None, requested: str | None, default: str) -> str:
    """The tenant a request acts for: the key's, checked against the requested one (403 when they differ).
    The requested name is checked here for every route: a query or form field passed no body schema, and the
    upload route makes a folder of it."""
    if requested:
        try:
            validate_collection_name(requested, "tenant")
        except ValueError as error:
            raise ApiError(422, "ValidationError", f"tenant_id: {error}", "tenant_id") from error
    if authorized is None:
        return requested or default
    if requested and requested != authorized:
        raise ApiError(403, "Forbidden", f"this API key may not act for tenant {requested!r}", "tenant_id")
    return authorized
