"""Bearer tokens per role (decision S2).

The calling platform is trusted with a bearer token per role:

* ``admin`` — configuration, nodes, quota definitions (elastic quotas, quota trees, forests), and
  everything ``submit`` and ``read`` may do;
* ``submit`` — applications and allocations, and everything ``read`` may do;
* ``read`` — every GET, ``validate-conf`` and ``whatif`` (they change nothing).

Tokens come from the environment (``QUOTAPLANE_TOKENS="admin=…,submit=…,read=…"``, each of 16
characters at least; a role may appear several times) and/or a file named by
``QUOTAPLANE_TOKENS_FILE`` (JSON or YAML: ``{"admin": ["…"], "submit": ["…"], "read": ["…"]}``, or one
``role=token`` per line). Without any
token the service binds to loopback only and accepts every request.

A missing or unknown token is 401 (with ``WWW-Authenticate: Bearer``); a known token whose role is too
weak is 403.

Two ways in without the header, both for reading only (GET and HEAD; a write always needs the header,
so a browser can never be made to write by another site's page):

* **a session cookie** (the web page's login form, :mod:`quotaplane.server.ui`): ``POST /ui/login``
  with a token sets ``quotaplane_session`` — HttpOnly, SameSite=Strict, ``Secure`` over HTTPS, for
  ``QUOTAPLANE_SESSION_TTL`` seconds (default 8 hours) — carrying the role of that token. The cookie is
  signed with a key derived from the configured tokens, so every instance configured alike accepts
  it, and changing the tokens ends every session; it holds neither the token nor its digest.
  ``POST /ui/logout`` ends it.
* **anonymous read** (``serve --anonymous-read``, ``QUOTAPLANE_ANONYMOUS_READ=1``): a request without
  a token gets the ``read`` role, so YuniKorn's web UI, Prometheus and the admission controller's
  ``validate-conf`` work against a secured instance. Writes still need their token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from quotaplane.errors import InputError
from quotaplane.server.errors import ApiError

__all__ = ["MIN_TOKEN_LENGTH", "ROLES", "SESSION_COOKIE", "SESSION_TTL", "Tokens", "load_tokens",
           "parse_tokens"]

#: The roles, weakest first; a stronger role may do everything a weaker one may.
ROLES: tuple[str, ...] = ("read", "submit", "admin")
_RANK = {role: i for i, role in enumerate(ROLES)}


#: the web page's session cookie
SESSION_COOKIE = "quotaplane_session"
#: seconds a session lasts (``QUOTAPLANE_SESSION_TTL``)
SESSION_TTL = 8 * 3600
#: methods a session cookie or anonymous read may be used for: reading only
_SAFE = frozenset({"GET", "HEAD"})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _digest(token: str) -> bytes:
    # Look tokens up by digest so the comparison does not leak the token prefix through timing.
    return hashlib.sha256(token.encode("utf-8")).digest()


class Tokens:
    """The configured tokens: ``digest -> role``. Empty means "no authentication" (loopback only).

    ``anonymous_read``: a request without a token has the ``read`` role. ``session_ttl``: seconds a
    web session lasts. ``clock``: the time source of session expiry (tests move it).
    """

    __slots__ = ("_by_digest", "_key", "_revoked", "_tid_role", "anonymous_read", "clock", "session_ttl")

    def __init__(self, tokens: Mapping[str, Iterable[str]] | None = None, *, anonymous_read: bool = False,
                 session_ttl: float = SESSION_TTL, clock: Callable[[], float] = time.time) -> None:
        self._by_digest: dict[bytes, str] = {}
        for role, values in (tokens or {}).items():
            if role not in _RANK:
                raise InputError(f"unknown role {role!r} in tokens (roles: {', '.join(ROLES)})")
            self._add_role(role, [values] if isinstance(values, str) else values)
        if session_ttl <= 0:
            raise InputError(f"the session lifetime must be positive, not {session_ttl}")
        self.anonymous_read = anonymous_read
        self.session_ttl = session_ttl
        self.clock = clock
        # The session key comes from every configured token (instances configured alike share it;
        # new tokens end all sessions). A session names its token by a keyed digest (``tid``), so the
        # cookie reveals nothing that could be tried against the token offline.
        self._key = hashlib.sha256(b"quotaplane-session\0" + b"".join(sorted(self._by_digest))).digest()
        self._tid_role = {self._tid(d): role for d, role in self._by_digest.items()}
        self._revoked: dict[str, float] = {}

    def _add_role(self, role: str, values: Iterable[str]) -> None:
        """The tokens of one role, by digest; a token listed under two roles gets the stronger one."""
        for token in values:
            if not isinstance(token, str) or not token.strip():
                raise InputError(f"empty token for role {role!r}")
            d = _digest(token.strip())
            if d not in self._by_digest or _RANK[role] > _RANK[self._by_digest[d]]:
                self._by_digest[d] = role

    def __bool__(self) -> bool:
        return bool(self._by_digest)

    def role_of(self, token: str) -> str | None:
        """The role of ``token``, or None when it is unknown."""
        return self._by_digest.get(_digest(token))

    def check(self, token: str | None, role: str) -> None:
        """Raise :class:`ApiError` 401/403 unless ``token`` grants ``role`` (no-op without tokens).
        Without a token, anonymous read grants ``read``."""
        if not self._by_digest:
            return
        if not token:
            if self.anonymous_read and role == "read":
                return
            raise ApiError(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
        have = self.role_of(token)
        if have is None:
            raise ApiError(401, "invalid bearer token", headers={"WWW-Authenticate": "Bearer"})
        self._rank_check(have, role)

    @staticmethod
    def _rank_check(have: str, role: str) -> None:
        if _RANK[have] < _RANK[role]:
            raise ApiError(403, f"the token's role {have!r} may not do this; role {role!r} needed")

    # -- web sessions -----------------------------------------------------------------------------
    def _tid(self, digest: bytes) -> str:
        return _b64(hmac.new(self._key, b"tid\0" + digest, hashlib.sha256).digest()[:12])

    def _sign(self, payload: bytes) -> str:
        return _b64(hmac.new(self._key, b"cookie\0" + payload, hashlib.sha256).digest())

    def open_session(self, token: str) -> str:
        """The cookie value of a new session for ``token``; 401 when the token is unknown."""
        digest = _digest(token.strip())
        if digest not in self._by_digest:
            raise ApiError(401, "invalid token", headers={"WWW-Authenticate": "Bearer"})
        payload = json.dumps({"sid": _b64(secrets.token_bytes(12)), "tid": self._tid(digest),
                              "exp": int(self.clock() + self.session_ttl)}, separators=(",", ":")).encode()
        return f"{_b64(payload)}.{self._sign(payload)}"

    def _session(self, cookie: str | None) -> dict[str, Any] | None:
        if not cookie or "." not in cookie or len(cookie) > 512:
            return None
        body, _, sig = cookie.partition(".")
        try:
            payload = _unb64(body)
            if not hmac.compare_digest(sig, self._sign(payload)):
                return None
            data = json.loads(payload)
        except (ValueError, TypeError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("exp"), int):
            return None
        if data["exp"] <= self.clock() or data.get("sid") in self._revoked:
            return None
        return data

    def session_role(self, cookie: str | None) -> str | None:
        """The role of the session ``cookie`` carries, or None: absent, forged, expired, logged out,
        or its token no longer configured."""
        data = self._session(cookie)
        return None if data is None else self._tid_role.get(str(data.get("tid")))

    def close_session(self, cookie: str | None) -> None:
        """Log out: the session is refused from now on (until it would have expired anyway)."""
        data = self._session(cookie)
        if data is None:
            return
        now = self.clock()
        for sid, exp in list(self._revoked.items()):        # forget sessions that expired anyway
            if exp <= now:
                del self._revoked[sid]
        self._revoked[str(data["sid"])] = float(data["exp"])

    def check_request(self, request: Request, token: str | None, role: str) -> None:
        """:meth:`check` for one request: the bearer ``token`` if any; else, to read, the session
        cookie, then anonymous read."""
        if not self._by_digest or token:
            self.check(token, role)
            return
        if request.method in _SAFE:
            have = self.session_role(request.cookies.get(SESSION_COOKIE))
            if have is not None:
                self._rank_check(have, role)
                return
        if role == "read" and self.anonymous_read:
            return              # also validate-conf and whatif (POST): they change nothing
        raise ApiError(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})

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
        async def require(request: Request,
                          creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
            self.check_request(request, creds.credentials if creds is not None else None, role)

        return require


def _structured_tokens(data: Any) -> dict[str, list[str]]:
    if not isinstance(data, dict):
        raise InputError("tokens must be a mapping role -> token or list of tokens")
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
            raise InputError(f"bad token entry {item!r}: expected role=token")
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


def _flag(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


#: the shortest token ``serve`` accepts (issue 32 item 12: a one-character token was accepted)
MIN_TOKEN_LENGTH = 16


def _check_lengths(tokens: Mapping[str, list[str]]) -> None:
    """Every configured token has :data:`MIN_TOKEN_LENGTH` characters at least."""
    for role, values in tokens.items():
        for token in values:
            if 0 < len(token.strip()) < MIN_TOKEN_LENGTH:
                raise InputError(f"a token of role {role!r} is {len(token.strip())} characters long: at "
                                 f"least {MIN_TOKEN_LENGTH} are needed (e.g. python3 -c 'import secrets; "
                                 "print(secrets.token_urlsafe(24))')")


def load_tokens(environ: Mapping[str, str] | None = None, *, anonymous_read: bool | None = None) -> Tokens:
    """Tokens from ``QUOTAPLANE_TOKENS`` and the file named by ``QUOTAPLANE_TOKENS_FILE``, each of
    :data:`MIN_TOKEN_LENGTH` characters at least (ValueError naming the role); anonymous read
    from ``anonymous_read`` or else ``QUOTAPLANE_ANONYMOUS_READ``; the session lifetime from
    ``QUOTAPLANE_SESSION_TTL`` (seconds)."""
    env = os.environ if environ is None else environ
    merged: dict[str, list[str]] = {}
    file_name = env.get("QUOTAPLANE_TOKENS_FILE", "").strip()
    if file_name:
        for role, values in parse_tokens(Path(file_name).read_text(encoding="utf-8")).items():
            merged.setdefault(role, []).extend(values)
    for role, values in parse_tokens(env.get("QUOTAPLANE_TOKENS", "")).items():
        merged.setdefault(role, []).extend(values)
    _check_lengths(merged)
    if anonymous_read is None:
        anonymous_read = _flag(env.get("QUOTAPLANE_ANONYMOUS_READ", ""))
    ttl_text = env.get("QUOTAPLANE_SESSION_TTL", "").strip()
    try:
        ttl = float(ttl_text) if ttl_text else SESSION_TTL
    except ValueError:
        raise InputError(f"QUOTAPLANE_SESSION_TTL must be a number of seconds, not {ttl_text!r}") from None
    return Tokens(merged, anonymous_read=anonymous_read, session_ttl=ttl)
