"""Bearer tokens per role (decision S2).

The calling platform is trusted with a bearer token per role:

* ``admin`` — configuration, nodes, quota definitions (elastic quotas, quota trees, forests), and
  everything ``submit`` and ``read`` may do;
* ``submit`` — applications and allocations, and everything ``read`` may do;
* ``read`` — every GET, ``validate-conf`` and ``whatif`` (they change nothing).

Tokens come from the environment (``QUOTAPLANE_TOKENS="admin=s3cret,submit=t0k,read=r3ad"``; a role may
appear several times) and/or a file named by ``QUOTAPLANE_TOKENS_FILE`` (JSON or YAML:
``{"admin": ["…"], "submit": ["…"], "read": ["…"]}``, or one ``role=token`` per line). Without any
token the service binds to loopback only and accepts every request.

A missing or unknown token is 401 (with ``WWW-Authenticate: Bearer``); a known token whose role is too
weak is 403.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from quotaplane.server.errors import ApiError

__all__ = ["ROLES", "Tokens", "load_tokens", "parse_tokens"]

#: The roles, weakest first; a stronger role may do everything a weaker one may.
ROLES: tuple[str, ...] = ("read", "submit", "admin")
_RANK = {role: i for i, role in enumerate(ROLES)}


def _digest(token: str) -> bytes:
    # Look tokens up by digest so the comparison does not leak the token prefix through timing.
    return hashlib.sha256(token.encode("utf-8")).digest()


class Tokens:
    """The configured tokens: ``digest -> role``. Empty means "no authentication" (loopback only)."""

    __slots__ = ("_by_digest",)

    def __init__(self, tokens: Mapping[str, Iterable[str]] | None = None) -> None:
        self._by_digest: dict[bytes, str] = {}
        for role, values in (tokens or {}).items():
            if role not in _RANK:
                raise ValueError(f"unknown role {role!r} in tokens (roles: {', '.join(ROLES)})")
            if isinstance(values, str):
                values = [values]
            for token in values:
                if not isinstance(token, str) or not token.strip():
                    raise ValueError(f"empty token for role {role!r}")
                d = _digest(token.strip())
                # A token listed under two roles gets the stronger one.
                if d not in self._by_digest or _RANK[role] > _RANK[self._by_digest[d]]:
                    self._by_digest[d] = role

    def __bool__(self) -> bool:
        return bool(self._by_digest)

    def role_of(self, token: str) -> str | None:
        """The role of ``token``, or None when it is unknown."""
        return self._by_digest.get(_digest(token))

    def check(self, token: str | None, role: str) -> None:
        """Raise :class:`ApiError` 401/403 unless ``token`` grants ``role`` (no-op without tokens)."""
        if not self._by_digest:
            return
        if not token:
            raise ApiError(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
        have = self.role_of(token)
        if have is None:
            raise ApiError(401, "invalid bearer token", headers={"WWW-Authenticate": "Bearer"})
        if _RANK[have] < _RANK[role]:
            raise ApiError(403, f"the token's role {have!r} may not do this; role {role!r} needed")

    def dependencies(self, role: str) -> list[Any]:
        """Route ``dependencies=`` enforcing ``role``: none at all without tokens (saves a dependency
        pass per request on the hot path)."""
        if not self._by_digest:
            return []
        return [Depends(self.dependency(role))]

    def dependency(self, role: str) -> Callable[..., Any]:
        """A FastAPI dependency enforcing ``role`` (declares the bearer scheme in OpenAPI)."""
        if not self._by_digest:
            async def open_access() -> None:
                return None
            return open_access

        bearer = HTTPBearer(auto_error=False, description=f"bearer token with role {role!r} or stronger")

        # The dependency is a default value (not inside Annotated): the annotation is a string here
        # (postponed evaluation) and FastAPI could not resolve a local name inside it.
        async def require(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
            self.check(creds.credentials if creds is not None else None, role)

        return require


def _structured_tokens(data: Any) -> dict[str, list[str]]:
    if not isinstance(data, dict):
        raise ValueError("tokens must be a mapping role -> token or list of tokens")
    out: dict[str, list[str]] = {}
    for role, values in data.items():
        vals = [values] if isinstance(values, str) else list(values or [])
        out.setdefault(str(role), []).extend(str(v) for v in vals)
    return out


def _pair_tokens(text: str) -> dict[str, list[str]]:
    result: dict[str, list[str]] = {}
    for raw in text.replace(",", "\n").splitlines():
        item = raw.strip()
        if not item or item.startswith("#"):
            continue
        role, sep, token = item.partition("=")
        if not sep or not token.strip():
            raise ValueError(f"bad token entry {item!r}: expected role=token")
        result.setdefault(role.strip(), []).append(token.strip())
    return result


def parse_tokens(text: str) -> dict[str, list[str]]:
    """Parse tokens from ``role=token`` pairs (comma or newline separated), JSON or YAML mapping."""
    stripped = text.strip()
    if not stripped:
        return {}
    if stripped.startswith("{"):
        return _structured_tokens(json.loads(stripped))
    meaningful = [ln.strip() for ln in stripped.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if meaningful and "=" not in meaningful[0]:
        from ruamel.yaml import YAML

        data = YAML(typ="safe").load(stripped)
        if data is not None:
            return _structured_tokens(data)
    return _pair_tokens(stripped)


def load_tokens(environ: Mapping[str, str] | None = None) -> Tokens:
    """Tokens from ``QUOTAPLANE_TOKENS`` and the file named by ``QUOTAPLANE_TOKENS_FILE``."""
    env = os.environ if environ is None else environ
    merged: dict[str, list[str]] = {}
    file_name = env.get("QUOTAPLANE_TOKENS_FILE", "").strip()
    if file_name:
        for role, values in parse_tokens(Path(file_name).read_text(encoding="utf-8")).items():
            merged.setdefault(role, []).extend(values)
    for role, values in parse_tokens(env.get("QUOTAPLANE_TOKENS", "")).items():
        merged.setdefault(role, []).extend(values)
    return Tokens(merged)
