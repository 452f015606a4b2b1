"""Resource vectors and quantity parsing — the base every engine stands on.

A :class:`Resource` is an immutable mapping ``name -> int`` in internal units (YuniKorn's): ``vcore`` in
milli-cores, ``memory`` in bytes, ``pods`` a count, any other name as given (contract.md "Units").

The arithmetic follows YuniKorn's ``resources.go`` rule by rule (reference R-1 … R-9); ``None`` plays the
part of Go's ``nil`` where the rules distinguish it from an empty resource. Quantity parsing follows
YuniKorn's ``quantity.go`` for configuration values (Q-1 … Q-6) and Kubernetes' ``resource.Quantity`` for
Kubernetes objects (K8-1, K8-2).
"""

from __future__ import annotations

import re
from collections.abc import ItemsView, Iterator, Mapping
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, overload

from quotaplane.errors import InputError

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "Resource",
    "add",
    "component_wise_min",
    "equals",
    "fit_in",
    "fit_in_max_undef",
    "is_zero",
    "parse_k8s_quantity",
    "parse_quantity",
    "parse_vcore",
    "prune",
    "shared",
    "strictly_greater_than_zero",
    "sub",
    "sub_only_existing",
]

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

VCORE = "vcore"


def _clamp(value: int) -> int:
    # int64 overflow clamps instead of wrapping.
    if value > INT64_MAX:
        return INT64_MAX
    if value < INT64_MIN:
        return INT64_MIN
    return value


class Resource(Mapping[str, int]):
    """An immutable resource vector ``{name: int}``.

    Equality treats a missing name as 0 (R-9), against another Resource or a plain dict, so
    ``Resource({"memory": 0}) == {}``. Values are plain ``int`` and must fit in int64.
    """

    __slots__ = ("_hash", "_values")

    _values: dict[str, int]
    _hash: int | None

    def __init__(self, values: Mapping[str, int] | None = None, /, **kwargs: int) -> None:
        data: dict[str, int] = {}
        if values:
            for name, amount in values.items():
                data[name] = _check_amount(name, amount)
        for name, amount in kwargs.items():
            data[name] = _check_amount(name, amount)
        object.__setattr__(self, "_values", data)
        object.__setattr__(self, "_hash", None)

    @classmethod
    def of(cls, values: dict[str, int]) -> Resource:
        """The fast constructor: adopt ``values`` without copying or checking.

        For amounts the caller has already checked (plain ``int`` within int64) in a dict it gives up:
        changing ``values`` afterwards would change the Resource. Everything else uses ``Resource(…)``.
        """
        r = object.__new__(cls)
        object.__setattr__(r, "_values", values)
        object.__setattr__(r, "_hash", None)
        return r

    # -- Mapping protocol -------------------------------------------------------------------------
    def __getitem__(self, name: str) -> int:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def get(self, name: str, default: Any = None) -> Any:
        """The amount of ``name``, or ``default`` when the name is not present."""
        return self._values.get(name, default)

    def items(self) -> ItemsView[str, int]:
        """``(name, amount)`` pairs: the dict's own view (Mapping's generic one costs a Python call per
        item, and every admission walks a resource)."""
        return self._values.items()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Resource is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Resource is immutable")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resource):
            other_values: Mapping[Any, Any] = other._values
        elif isinstance(other, Mapping):
            other_values = other
        else:
            return NotImplemented
        mine = self._values
        for name, amount in mine.items():
            if other_values.get(name, 0) != amount:
                return False
        for name, amount in other_values.items():  # noqa: SIM110 - a plain loop is faster here
            if name not in mine and amount != 0:
                return False
        return True

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        cached: int | None = self._hash
        if cached is None:
            cached = hash(frozenset((k, v) for k, v in self._values.items() if v != 0))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {v}" for k, v in sorted(self._values.items()))
        return f"Resource({{{inner}}})"

    def __str__(self) -> str:
        # YuniKorn prints resources like a Go map in error messages: map[memory:10 vcore:1000].
        inner = " ".join(f"{k}:{v}" for k, v in sorted(self._values.items()))
        return f"map[{inner}]"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Resource, (dict(self._values),))

    # -- arithmetic -------------------------------------------------------------------------------
    def __add__(self, other: Mapping[str, int]) -> Resource:
        if not isinstance(other, Mapping):
            return NotImplemented
        return add(self, other)

    def __radd__(self, other: Mapping[str, int]) -> Resource:
        if not isinstance(other, Mapping):
            return NotImplemented
        return add(other, self)

    def __sub__(self, other: Mapping[str, int]) -> Resource:
        if not isinstance(other, Mapping):
            return NotImplemented
        return sub(self, other)

    def __neg__(self) -> Resource:
        return Resource.of({k: _clamp(-v) for k, v in self._values.items()})

    def plain(self) -> dict[str, int]:
        """A fresh plain ``dict`` copy in the Resource's own order (cheaper than :meth:`to_dict`)."""
        return dict(self._values)

    def to_dict(self) -> dict[str, int]:
        """A fresh plain ``dict`` copy (names sorted, for stable JSON)."""
        return {k: self._values[k] for k in sorted(self._values)}

    def pruned(self) -> Resource:
        """R-3: the same vector without the names whose amount is exactly 0."""
        return prune(self)

    def is_zero(self) -> bool:
        """R-8: true when every amount is 0 (or there is none)."""
        return is_zero(self)

    def strictly_greater_than_zero(self) -> bool:
        """R-8: at least one amount above 0 and none below."""
        return strictly_greater_than_zero(self)

    def fit_in_max_undef(self, request: Mapping[str, int] | None) -> bool:
        """R-6: ``request`` fits in this headroom/max; names missing here are unlimited."""
        return fit_in_max_undef(self, request)

    def fit_in(self, request: Mapping[str, int] | None) -> bool:
        """R-7: strict fit; a name missing here counts as 0."""
        return fit_in(self, request)

    def has_negative(self) -> bool:
        """True when some amount is below 0."""
        return any(v < 0 for v in self._values.values())

    # -- parsing ----------------------------------------------------------------------------------
    @classmethod
    def from_config(cls, mapping: Mapping[str, Any] | None) -> Resource:
        """Parse YuniKorn config quantities (Q-1 … Q-6).

        Values are YAML integers or strings of non-negative integers with an optional SI or binary
        suffix; only ``vcore`` (and its flavored names ``vcore@FLAVOR``, docs/flavors.md) is converted
        to milli and accepts ``m``. Raises :class:`ValueError` naming the resource and the text.
        """
        if mapping is None:
            return cls()
        if not isinstance(mapping, Mapping):
            raise InputError(f"resources must be a mapping of name to quantity, got {mapping!r}")
        data: dict[str, int] = {}
        for name, raw in mapping.items():
            if not isinstance(name, str) or not name:
                raise InputError(f"invalid resource name {name!r}")
            text = _config_text(name, raw)
            try:
                data[name] = parse_vcore(text) if _is_vcore(name) else parse_quantity(text)
            except ValueError as exc:
                raise InputError(f"resource {name!r}: {exc}") from None
        return cls.of(data)

    @classmethod
    def from_k8s(cls, mapping: Mapping[str, Any] | None) -> Resource:
        """Parse a Kubernetes ResourceList (K8-1, K8-2).

        ``cpu`` becomes ``vcore`` in milli-cores (rounded up), a flavored ``cpu@FLAVOR`` becomes
        ``vcore@FLAVOR`` (docs/flavors.md); other names keep their name and take the quantity's value
        rounded up. Decimals, exponents and every Kubernetes suffix are allowed;
        negative amounts are a :class:`ValueError` (contract.md), as is overflow.
        """
        if mapping is None:
            return cls()
        if not isinstance(mapping, Mapping):
            raise InputError(f"resources must be a mapping of name to quantity, got {mapping!r}")
        data: dict[str, int] = {}
        for name, raw in mapping.items():
            if not isinstance(name, str) or not name:
                raise InputError(f"invalid resource name {name!r}")
            try:
                value = parse_k8s_quantity(raw)
                if value < 0:
                    raise InputError(f"negative quantity {raw!r}")
                if name == "cpu" or name.startswith(_CPU_FLAVORED):
                    amount = _ceil(value * 1000)
                    key = VCORE + name[3:]
                else:
                    amount = _ceil(value)
                    key = name
                if amount > INT64_MAX:
                    raise InputError(f"quantity {raw!r} overflows int64")
            except ValueError as exc:
                raise InputError(f"resource {name!r}: {exc}") from None
            data[key] = data.get(key, 0) + amount
        return cls.of(data)


_VCORE_FLAVORED = VCORE + "@"
_CPU_FLAVORED = "cpu@"


def _is_vcore(name: str) -> bool:
    """``vcore`` or one of its flavored names (``vcore@spot``): counted in milli-cores."""
    return name == VCORE or (name.startswith(_VCORE_FLAVORED) and len(name) > len(_VCORE_FLAVORED))


def _check_amount(name: object, amount: object) -> int:
    if not isinstance(name, str):
        raise TypeError(f"resource name must be a string, got {name!r}")
    if type(amount) is not int:
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise TypeError(f"resource {name!r}: amount must be an integer, got {amount!r}")
        amount = int(amount)
    if amount > INT64_MAX or amount < INT64_MIN:
        raise InputError(f"resource {name!r}: amount {amount} overflows int64")
    return amount


def _config_text(name: str, raw: Any) -> str:
    if isinstance(raw, bool) or raw is None:
        raise InputError(f"resource {name!r}: invalid quantity {raw!r}")
    if isinstance(raw, int):
        return str(raw)
    if isinstance(raw, str):
        return raw
    raise InputError(f"resource {name!r}: invalid quantity {raw!r}")


#: one Resource per distinct vector (a Resource never changes), for :func:`shared`
_SHARED: dict[tuple[tuple[str, int], ...], Resource] = {}
#: how many distinct vectors :data:`_SHARED` holds before it starts over
_SHARED_MAX = 4096


def shared(resource: Resource) -> Resource:
    """One Resource equal to ``resource`` (same names in the same order), the same object for every
    call with such a vector while it stays in a bounded cache: what keeps a request per waiting ask
    (many asks request the same vector — a job's pods, a class of workloads) shares it instead of
    holding a copy each."""
    key = tuple(resource._values.items())
    found = _SHARED.get(key)
    if found is None:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.clear()
        found = _SHARED[key] = resource
    return found


# ------------------------------------------------------------------------------------------------
# R-1 … R-9 as functions over mappings. ``None`` is Go's nil.
# ------------------------------------------------------------------------------------------------
def _values_of(r: Mapping[str, int]) -> Mapping[str, int]:
    return r._values if isinstance(r, Resource) else r


def add(a: Mapping[str, int] | None, b: Mapping[str, int] | None) -> Resource:
    """R-2: the sum over the union of names, clamped to int64."""
    out = dict(_values_of(a)) if a else {}
    if b:
        for name, amount in _values_of(b).items():
            out[name] = _clamp(out.get(name, 0) + amount)
    return Resource.of(out)


def sub(a: Mapping[str, int] | None, b: Mapping[str, int] | None) -> Resource:
    """R-2: ``a - b`` over the union of names, clamped to int64; results may be negative."""
    out = dict(_values_of(a)) if a else {}
    if b:
        for name, amount in _values_of(b).items():
            out[name] = _clamp(out.get(name, 0) - amount)
    return Resource.of(out)


@overload
def sub_only_existing(base: None, delta: Mapping[str, int] | None) -> None: ...
@overload
def sub_only_existing(base: Mapping[str, int], delta: Mapping[str, int] | None) -> Resource: ...
def sub_only_existing(base: Mapping[str, int] | None, delta: Mapping[str, int] | None) -> Resource | None:
    """R-4: only the names of ``base``, each ``base - delta``; nil base stays nil."""
    if base is None:
        return None
    bv = _values_of(base)
    if delta is None:
        return Resource.of(dict(bv))
    dv = _values_of(delta)
    return Resource.of({k: _clamp(v - dv.get(k, 0)) for k, v in bv.items()})


def component_wise_min(a: Mapping[str, int] | None, b: Mapping[str, int] | None) -> Resource | None:
    """R-5: both nil → nil; one nil → the other; else the union, min where a name is in both."""
    if a is None and b is None:
        return None
    if a is None:
        assert b is not None
        return Resource.of(dict(_values_of(b)))
    if b is None:
        return Resource.of(dict(_values_of(a)))
    out = dict(_values_of(a))
    for name, amount in _values_of(b).items():
        mine = out.get(name)
        if mine is None or amount < mine:
            out[name] = amount
    return Resource.of(out)


def fit_in_max_undef(headroom: Mapping[str, int] | None, request: Mapping[str, int] | None) -> bool:
    """R-6: each requested name that the headroom defines must be ``<= max(0, headroom)``.

    A nil request always fits; a nil headroom fits everything; names missing from the headroom are
    unlimited.
    """
    if not request or not headroom:
        return True
    hv = _values_of(headroom)
    for name, amount in _values_of(request).items():
        limit = hv.get(name)
        if limit is not None and amount > (limit if limit > 0 else 0):
            return False
    return True


def fit_in(larger: Mapping[str, int] | None, smaller: Mapping[str, int] | None) -> bool:
    """R-7: strict fit: a name missing from ``larger`` counts as 0."""
    if not smaller:
        return True
    lv = _values_of(larger) if larger else {}
    for name, amount in _values_of(smaller).items():  # noqa: SIM110 - a plain loop is faster here
        if amount > lv.get(name, 0):
            return False
    return True


def prune(r: Mapping[str, int] | None) -> Resource:
    """R-3: drop the names whose amount is exactly 0."""
    if not r:
        return Resource()
    return Resource.of({k: v for k, v in _values_of(r).items() if v != 0})


def is_zero(r: Mapping[str, int] | None) -> bool:
    """R-8: nil, empty or all zero."""
    if not r:
        return True
    return all(v == 0 for v in _values_of(r).values())


def strictly_greater_than_zero(r: Mapping[str, int] | None) -> bool:
    """R-8: false for nil; needs one amount above 0 and none below."""
    if r is None:
        return False
    values = _values_of(r).values()
    return any(v > 0 for v in values) and all(v >= 0 for v in values)


def equals(a: Mapping[str, int] | None, b: Mapping[str, int] | None) -> bool:
    """R-9: a missing name counts as 0; nil equals only nil."""
    if a is None or b is None:
        return a is None and b is None
    return Resource.of(dict(_values_of(a))) == _values_of(b)


# ------------------------------------------------------------------------------------------------
# Q-1 … Q-6: YuniKorn config quantities
# ------------------------------------------------------------------------------------------------
_CONFIG_QUANTITY = re.compile(r"^([0-9]+)\s*([mkKMGTPE]i?)?$")
_MULTIPLIERS: dict[str, int] = {
    "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}


def _split_config_quantity(text: str) -> tuple[int, str]:
    if not isinstance(text, str):
        raise InputError(f"invalid quantity {text!r}")
    match = _CONFIG_QUANTITY.match(text.strip())
    if match is None:
        raise InputError(f"invalid quantity {text!r}")
    # Leading zeros are harmless (Go's ParseInt); more than 20 significant digits always overflows
    # int64 and must say so, not hit Python's int-from-string digit limit.
    digits = match.group(1).lstrip("0") or "0"
    number = int(digits) if len(digits) <= 20 else INT64_MAX + 1
    return number, match.group(2) or ""


def parse_quantity(text: str) -> int:
    """Q-1/Q-2/Q-5: a non-negative integer with an optional SI (``k``…``E``) or binary suffix."""
    number, suffix = _split_config_quantity(text)
    multiplier = _MULTIPLIERS.get(suffix)
    if multiplier is None:  # includes "m", which only vcore accepts
        raise InputError(f"invalid suffix {suffix!r} in quantity {text!r}")
    value = number * multiplier
    if value > INT64_MAX:
        raise InputError(f"invalid quantity: overflow {text!r}")
    return value


def parse_vcore(text: str) -> int:
    """Q-4: like :func:`parse_quantity` but in milli-cores; the ``m`` suffix takes the raw value."""
    number, suffix = _split_config_quantity(text)
    if suffix == "m":
        value = number
    else:
        multiplier = _MULTIPLIERS.get(suffix)
        if multiplier is None:
            raise InputError(f"invalid suffix {suffix!r} in quantity {text!r}")
        value = number * multiplier * 1000
    if value > INT64_MAX:
        raise InputError(f"invalid quantity: overflow {text!r}")
    return value


# ------------------------------------------------------------------------------------------------
# K8-2: Kubernetes quantities (k8s.io/apimachinery resource.Quantity syntax)
# ------------------------------------------------------------------------------------------------
_K8S_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
_K8S_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
# Kubernetes caps quantities far beyond int64; anything this large overflows every unit we use.
_K8S_MAX_EXPONENT = 40


def parse_k8s_quantity(raw: Any) -> Fraction:
    """Parse a Kubernetes quantity (``"250m"``, ``"1Gi"``, ``"0.5"``, ``"1e3"``, or a number) exactly.

    Returns the exact value as a :class:`~fractions.Fraction` (the sign is kept; callers decide
    whether negatives are allowed). Raises :class:`ValueError` naming the text.
    """
    if isinstance(raw, bool) or raw is None:
        raise InputError(f"invalid quantity {raw!r}")
    if isinstance(raw, int):
        return Fraction(raw)
    if isinstance(raw, float):
        return _float_quantity(raw)
    if not isinstance(raw, str):
        raise InputError(f"invalid quantity {raw!r}")
    match = _K8S_QUANTITY.match(raw.strip())
    if match is None:
        raise InputError(f"invalid quantity {raw!r}")
    value = Fraction(Decimal(match.group("num"))) * _suffix_factor(raw, match.group("suffix") or "")
    return -value if match.group("sign") == "-" else value


def _float_quantity(raw: float) -> Fraction:
    if raw != raw or raw in (float("inf"), float("-inf")):
        raise InputError(f"invalid quantity {raw!r}")
    try:
        return Fraction(Decimal(repr(raw)))
    except InvalidOperation:
        raise InputError(f"invalid quantity {raw!r}") from None


def _suffix_factor(raw: str, suffix: str) -> Fraction:
    """The factor of a quantity suffix: SI or binary, or a decimal exponent (``e3``, ``E-2``)."""
    if suffix in _K8S_SUFFIX:      # "E" and "Ei" alone are Exa suffixes
        return _K8S_SUFFIX[suffix]
    if len(suffix) > 8:
        raise InputError(f"quantity {raw!r} is out of range")
    exponent = int(suffix[1:])
    if abs(exponent) > _K8S_MAX_EXPONENT:
        raise InputError(f"quantity {raw!r} is out of range")
    return Fraction(10) ** exponent


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)
