"""Flavored resource names: how a quota per (flavor, resource) reaches engines that know no flavors.

A request for ``nvidia.com/gpu`` that is given flavor ``a100`` is charged under ``nvidia.com/gpu``
*and* under the flavored name ``nvidia.com/gpu@a100``. Every engine — the queue tree, the user group
manager, elastic quotas, quota trees — then keeps a quota per flavor simply by having a limit on the
flavored name, and a limit on the plain name still caps the total over all flavors (docs/flavors.md).

The separator ``@`` cannot appear in a Kubernetes resource name (a qualified name: an optional DNS
prefix, ``/``, then letters, digits, ``-``, ``_`` and ``.``) nor in a flavor name (a DNS subdomain, as
Kueue's ResourceFlavor names are), so a flavored name never collides with a real resource and splits
back unambiguously at its last ``@``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["FLAVOR_NAME", "SEPARATOR", "base_of", "flavor_of", "flavored", "flavors_in", "is_flavored",
           "split"]

#: between a resource name and its flavor
SEPARATOR = "@"

#: a flavor name: a DNS subdomain (Kueue's ResourceFlavor ``metadata.name``), at most 253 characters
FLAVOR_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")


def flavored(resource: str, flavor: str) -> str:
    """The flavored name of ``resource`` in ``flavor`` (``nvidia.com/gpu@a100``)."""
    return f"{resource}{SEPARATOR}{flavor}"


def split(name: str) -> tuple[str, str | None]:
    """``(resource, flavor)`` of a flavored name, ``(name, None)`` of a plain one."""
    base, sep, flavor = name.rpartition(SEPARATOR)
    if not sep or not base or not flavor:
        return name, None
    return base, flavor


def is_flavored(name: str) -> bool:
    """True for a flavored name (``resource@flavor``)."""
    return split(name)[1] is not None


def base_of(name: str) -> str:
    """The resource a (possibly flavored) name counts."""
    return split(name)[0]


def flavor_of(name: str) -> str | None:
    """The flavor of a flavored name, None for a plain one."""
    return split(name)[1]


def flavors_in(resource: Mapping[str, int]) -> dict[str, str]:
    """The flavor of each resource a charged request counts per flavor (``{nvidia.com/gpu: a100}`` for
    one charged under ``nvidia.com/gpu@a100``), sorted by resource name."""
    out: dict[str, str] = {}
    for name in resource:
        base, flavor = split(name)
        if flavor is not None:
            out[base] = flavor
    return dict(sorted(out.items()))
