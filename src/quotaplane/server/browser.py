"""Browser safety (issue 32 item 7): what keeps a web page from driving the service.

A browser lets any page send requests to any address, the user's loopback included; what it does not
let a page do is read the answer of another origin without CORS, choose most headers, or send a
"non-simple" request without asking first (a preflight). Without tokens every answer used to carry
``Access-Control-Allow-Origin: *``, a ``text/plain`` POST was served and the ``Host`` header was not
looked at, so a page could change the configuration through the user's browser (and a DNS-rebinding
page could read it). :class:`BrowserPolicy` closes each way in:

* **Host allow-list**: a request whose ``Host`` is not allowed is refused (403) — with no tokens
  configured, only loopback names (``localhost``, ``*.localhost``, ``127.0.0.0/8``, ``[::1]``, any
  port) by default, which defeats DNS rebinding; with tokens, any host (a page cannot add the
  bearer token). ``--allowed-hosts`` / ``QUOTAPLANE_ALLOWED_HOSTS`` sets the list (``*``: any;
  ``*.example.com``: the subdomains).
* **Origin check**: a request that may change something (POST, PUT, PATCH, DELETE) carrying an
  ``Origin`` other than the service's own (``Origin`` host = ``Host``) or an allowed one
  (``--allowed-origins``) is refused (403). Browsers send ``Origin`` with every such request, forms
  and ``fetch`` alike.
* **Content-Type**: such a request with a body typed other than JSON or YAML is refused (415) — the
  types a page can send without a preflight (``text/plain``, forms) are exactly the others. An
  operation that documents a form body (the web page's login) accepts that form type too; a body
  without a type is read as before (only non-browser clients send one: ``fetch`` always adds
  ``Origin``).
* **No wildcard CORS**: an answer to an allowed origin names it (``Access-Control-Allow-Origin:
  <origin>``, ``Vary: Origin``) and its preflight is answered; other origins get no CORS header, so
  their pages cannot read answers. ``--allowed-origins '*'`` restores YuniKorn's ``*`` (and lifts the
  Origin check): only sensible with tokens.

The login form of the web page (same origin, form-encoded) and YuniKorn's web UI (served on the
service's own origin, or through a proxy that forwards ``/ws/`` with a loopback ``Host``) keep working.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

from quotaplane.errors import InputError

__all__ = ["LOOPBACK_HOSTS", "BrowserPolicy", "default_allowed_hosts", "host_name", "media_type"]

#: the default allow-list without tokens: names that only ever resolve to this machine
LOOPBACK_HOSTS: tuple[str, ...] = ("localhost", "*.localhost", "127.0.0.0/8", "::1")

#: media types a state-changing request may carry (``+json``/``+yaml`` suffixes too)
_DOCUMENT_TYPES = frozenset({"application/json", "application/yaml", "application/x-yaml", "text/yaml",
                             "text/x-yaml"})

#: methods that may change state (the others are answered whatever their Origin)
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def default_allowed_hosts(tokens_configured: bool) -> list[str] | None:
    """The allow-list when none is configured: loopback names without tokens, any host with them."""
    return None if tokens_configured else list(LOOPBACK_HOSTS)


def host_name(host: str) -> str:
    """The name or address of a ``Host`` header value or an origin's authority, lower case, without
    the port and the IPv6 brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else host
    name, sep, port = host.rpartition(":")
    return name if sep and port.isdigit() else host


def media_type(content_type: str) -> str:
    """``application/json`` of ``Application/JSON; charset=utf-8``."""
    return content_type.split(";", 1)[0].strip().lower()


def is_document_type(kind: str) -> bool:
    """JSON or YAML (also ``application/…+json``, ``…+yaml``)."""
    return kind in _DOCUMENT_TYPES or kind.endswith(("+json", "+yaml"))


class BrowserPolicy:
    """The Host allow-list and the allowed origins (see the module). ``hosts`` None: any host;
    ``origins``: origins besides the service's own that may send changes and read answers (``*``:
    any, YuniKorn's wildcard)."""

    __slots__ = ("_host_cache", "_names", "_networks", "_suffixes", "any_host", "any_origin", "origins")

    def __init__(self, hosts: Sequence[str] | None = None, origins: Iterable[str] = ()) -> None:
        self.any_host = hosts is None or "*" in hosts
        self._names: set[str] = set()
        self._suffixes: list[str] = []
        self._networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in hosts or ():
            self._add_host(entry)
        self.origins: frozenset[str] = frozenset(_origin(o) for o in origins if o.strip())
        self.any_origin = "*" in self.origins
        #: Host header value -> allowed (a request carries the same few values over and over)
        self._host_cache: dict[bytes, bool] = {}

    def _add_host(self, entry: str) -> None:
        text = entry.strip().lower()
        if not text or text == "*":
            return
        if text.startswith("*."):
            self._suffixes.append(text[1:])
            return
        try:
            self._networks.append(ipaddress.ip_network(text.strip("[]"), strict=False))
            return
        except ValueError:
            pass
        if any(c in text for c in "/:@ ") or "*" in text:
            raise InputError(f"allowed host {entry!r} is not a host name, address, network or *.domain")
        self._names.add(text)

    def host_allowed(self, host: bytes | None) -> bool:
        """True when a request with this ``Host`` header value (None: none) may be served."""
        if self.any_host:
            return True
        if host is None:
            return False                        # HTTP/1.1 requires one; a browser always sends it
        known = self._host_cache.get(host)
        if known is None:
            known = self._match(host_name(host.decode("latin-1")))
            if len(self._host_cache) < 256:     # bounded: a client may send any value
                self._host_cache[host] = known
        return known

    def _match(self, name: str) -> bool:
        if name in self._names or any(name.endswith(s) for s in self._suffixes):
            return True
        try:
            address = ipaddress.ip_address(name)
        except ValueError:
            return False
        return any(address in net for net in self._networks)

    def origin_allowed(self, origin: bytes, host: bytes | None) -> bool:
        """True when a change may come from a page of ``origin`` (the request's ``Origin``): the
        service's own origin (its authority is the ``Host``) or an allowed one."""
        if self.any_origin:
            return True
        text = origin.decode("latin-1").strip().lower()
        if host is not None and _authority(text) == host.decode("latin-1").strip().lower():
            return True
        return text in self.origins

    def cors_origin(self, origin: bytes) -> bytes | None:
        """The ``Access-Control-Allow-Origin`` value for a request from ``origin``: ``*`` when any
        origin is allowed, the origin itself when it is allowed, else None (no CORS header)."""
        if self.any_origin:
            return b"*"
        text = origin.decode("latin-1").strip().lower()
        return origin if text in self.origins else None

    def describe_hosts(self) -> str:
        """The allow-list in words (for refusals and the start-up line)."""
        if self.any_host:
            return "any host"
        parts = sorted(self._names) + [f"*{s}" for s in self._suffixes] + [str(n) for n in self._networks]
        return ", ".join(parts)


def _origin(text: str) -> str:
    t = text.strip().lower().rstrip("/")
    if t != "*" and "://" not in t:
        raise InputError(f"allowed origin {text!r} is not an origin (scheme://host[:port]) or *")
    return t


def _authority(origin: str) -> str:
    """``host:port`` of ``scheme://host:port`` (``null`` and garbage: an empty string)."""
    _, sep, rest = origin.partition("://")
    return rest.split("/", 1)[0] if sep else ""
