"""Resource arithmetic R-1 … R-9 (reference §1.1) and the Resource mapping type (contract.md)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaplane.resources import (
    INT64_MAX,
    INT64_MIN,
    Resource,
    add,
    component_wise_min,
    equals,
    fit_in,
    fit_in_max_undef,
    is_zero,
    prune,
    strictly_greater_than_zero,
    sub,
    sub_only_existing,
)

# -- a sparse map; missing means 0 for arithmetic -----------------------------------------------


def test_r1_resource_is_an_immutable_int_mapping() -> None:
    r = Resource({"vcore": 2000, "memory": 10})
    assert r["vcore"] == 2000 and len(r) == 2 and set(r) == {"vcore", "memory"}
    assert "memory" in r and "pods" not in r and r.get("pods") is None and r.get("pods", 0) == 0
    with pytest.raises(AttributeError):
        r.x = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        r["vcore"] = 1  # type: ignore[index]
    assert Resource(vcore=1) == {"vcore": 1}


@pytest.mark.parametrize("bad", [{"a": 1.5}, {"a": True}, {"a": "1"}, {1: 1}])
def test_r1_amounts_must_be_integers_and_names_strings(bad: dict[object, object]) -> None:
    with pytest.raises(TypeError):
        Resource(bad)  # type: ignore[arg-type]


def test_r1_amounts_must_fit_int64() -> None:
    Resource({"a": INT64_MAX, "b": INT64_MIN})
    with pytest.raises(ValueError, match="overflows"):
        Resource({"a": INT64_MAX + 1})
    with pytest.raises(ValueError, match="overflows"):
        Resource({"a": INT64_MIN - 1})


def test_r1_missing_name_is_zero_for_arithmetic() -> None:
    assert add({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}
    assert sub({"a": 1}, {"b": 2}) == {"a": 1, "b": -2}


# -- R-2 --------------------------------------------------------------------------------------------
def test_r2_add_and_sub_over_the_union_may_go_negative() -> None:
    a = Resource({"vcore": 1000, "memory": 5})
    b = Resource({"memory": 10, "nvidia.com/gpu": 1})
    assert (a + b).to_dict() == {"memory": 15, "nvidia.com/gpu": 1, "vcore": 1000}
    assert (a - b).to_dict() == {"memory": -5, "nvidia.com/gpu": -1, "vcore": 1000}
    assert a + {"vcore": 1} == {"vcore": 1001, "memory": 5}
    assert {"vcore": 1} + a == {"vcore": 1001, "memory": 5}


def test_r2_overflow_clamps_to_int64() -> None:
    assert add({"a": INT64_MAX}, {"a": 1}) == {"a": INT64_MAX}
    assert sub({"a": INT64_MIN}, {"a": 1}) == {"a": INT64_MIN}
    assert sub({"a": 0}, {"a": INT64_MIN}) == {"a": INT64_MAX}
    assert -Resource({"a": INT64_MIN}) == {"a": INT64_MAX}


def test_r2_nil_operands() -> None:
    assert add(None, None) == {} and add(None, {"a": 1}) == {"a": 1}
    assert sub(None, {"a": 1}) == {"a": -1} and sub({"a": 1}, None) == {"a": 1}


def test_r2_operands_are_not_modified() -> None:
    a = Resource({"a": 1})
    b = {"a": 2}
    add(a, b)
    sub(a, b)
    assert a == {"a": 1} and b == {"a": 2}


# -- R-3 --------------------------------------------------------------------------------------------
def test_r3_prune_removes_exact_zeros_only() -> None:
    pruned = prune({"a": 0, "b": -1, "c": 2})
    assert pruned.to_dict() == {"b": -1, "c": 2} and "a" not in pruned
    assert Resource({"a": 0}).pruned().to_dict() == {}
    assert prune(None).to_dict() == {}


# -- R-4 --------------------------------------------------------------------------------------------
def test_r4_sub_only_existing_keeps_only_base_names() -> None:
    assert sub_only_existing({"a": 5, "b": 1}, {"a": 2, "c": 9}).to_dict() == {"a": 3, "b": 1}


def test_r4_nil_cases() -> None:
    assert sub_only_existing(None, {"a": 1}) is None
    base = Resource({"a": 1})
    clone = sub_only_existing(base, None)
    assert clone == base and clone is not base


# -- R-5 --------------------------------------------------------------------------------------------
def test_r5_component_wise_min_nil_rules() -> None:
    assert component_wise_min(None, None) is None
    assert component_wise_min(None, {"a": 1}) == {"a": 1}
    assert component_wise_min({"a": 1}, None) == {"a": 1}


def test_r5_union_with_min_where_both_define() -> None:
    merged = component_wise_min({"x": 5, "y": 1}, {"x": 3, "z": 7})
    assert merged is not None and merged.to_dict() == {"x": 3, "y": 1, "z": 7}
    # a limit on X at one level and on Y at another merges to {X, Y}
    assert component_wise_min({"X": 1}, {"Y": 2}) == {"X": 1, "Y": 2}


# -- R-6 --------------------------------------------------------------------------------------------
def test_r6_fit_in_max_undef() -> None:
    assert fit_in_max_undef({"a": 5}, None)
    assert fit_in_max_undef(None, {"a": 10**9})
    assert fit_in_max_undef({}, {"a": 10**9})
    assert fit_in_max_undef({"a": 5}, {"a": 5, "b": 10**9})  # b undefined: unlimited
    assert not fit_in_max_undef({"a": 5}, {"a": 6})
    # a negative headroom counts as 0: a request of that type > 0 fails, 0 fits
    assert not fit_in_max_undef({"a": -3}, {"a": 1})
    assert fit_in_max_undef({"a": -3}, {"a": 0})
    assert Resource({"a": 5}).fit_in_max_undef({"a": 5})


# -- R-7 --------------------------------------------------------------------------------------------
def test_r7_fit_in_is_strict_for_missing_names() -> None:
    assert fit_in({"a": 5}, {"a": 5})
    assert not fit_in({"a": 5}, {"b": 1})  # b missing from the larger side counts as 0
    assert fit_in({"a": 5}, {"b": 0})
    assert fit_in(None, None) and fit_in(None, {}) and not fit_in(None, {"a": 1})
    assert not Resource({"a": 5}).fit_in({"a": 6})


# -- R-8 --------------------------------------------------------------------------------------------
def test_r8_is_zero() -> None:
    assert is_zero(None) and is_zero({}) and is_zero({"a": 0, "b": 0})
    assert not is_zero({"a": 0, "b": -1})
    assert Resource({"a": 0}).is_zero()


def test_r8_strictly_greater_than_zero() -> None:
    assert not strictly_greater_than_zero(None)
    assert not strictly_greater_than_zero({})
    assert not strictly_greater_than_zero({"a": 0})
    assert strictly_greater_than_zero({"a": 1, "b": 0})
    assert not strictly_greater_than_zero({"a": 1, "b": -1})
    assert Resource({"memory": 100, "cpu": 0}).strictly_greater_than_zero()


# -- R-9 --------------------------------------------------------------------------------------------
def test_r9_equals_missing_is_zero_and_nil_only_equals_nil() -> None:
    assert equals({"memory": 0}, {})
    assert Resource({"memory": 0}) == {}
    assert Resource({}) == Resource({"memory": 0})
    assert equals(None, None)
    assert not equals(None, {}) and not equals({}, None)
    assert not equals({"a": 1}, {"a": 2})
    assert Resource({"a": 1}) != {"a": 1, "b": 1}
    assert Resource({"a": 1}) != 5
    assert hash(Resource({"a": 1, "b": 0})) == hash(Resource({"a": 1}))


def test_resource_text_forms_and_pickle() -> None:
    r = Resource({"vcore": 1000, "memory": 10})
    assert str(r) == "map[memory:10 vcore:1000]"  # YuniKorn's Go map printing
    assert repr(r) == "Resource({'memory': 10, 'vcore': 1000})"
    assert pickle.loads(pickle.dumps(r)) == r
    assert list(r.to_dict()) == ["memory", "vcore"]
    assert r.has_negative() is False and Resource({"a": -1}).has_negative()


# -- properties -------------------------------------------------------------------------------------
NAMES = st.sampled_from(["vcore", "memory", "pods", "nvidia.com/gpu", "x"])
SAFE = st.integers(min_value=-(2**61), max_value=2**61)
VECTORS = st.dictionaries(NAMES, SAFE, max_size=5).map(Resource)
ANY_AMOUNT = st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
OPTIONAL = st.none() | st.dictionaries(NAMES, ANY_AMOUNT, max_size=5).map(Resource)


@settings(max_examples=200)
@given(VECTORS, VECTORS)
def test_property_add_then_sub_is_identity(a: Resource, b: Resource) -> None:
    assert a + b - b == a
    assert equals(sub(add(a, b), b), a)


@settings(max_examples=200)
@given(VECTORS, VECTORS)
def test_property_add_is_commutative(a: Resource, b: Resource) -> None:
    assert a + b == b + a


@settings(max_examples=200)
@given(OPTIONAL, OPTIONAL)
def test_property_component_wise_min_is_commutative(a: Resource | None, b: Resource | None) -> None:
    assert component_wise_min(a, b) == component_wise_min(b, a)


@settings(max_examples=200)
@given(OPTIONAL, OPTIONAL, OPTIONAL)
def test_property_component_wise_min_is_associative(a: Resource | None, b: Resource | None,
                                                    c: Resource | None) -> None:
    left = component_wise_min(component_wise_min(a, b), c)
    right = component_wise_min(a, component_wise_min(b, c))
    assert left == right
    if left is not None and right is not None:
        assert set(left) == set(right)  # the same names, not only equal amounts


@settings(max_examples=200)
@given(OPTIONAL, OPTIONAL)
def test_property_min_fits_in_both_operands(a: Resource | None, b: Resource | None) -> None:
    m = component_wise_min(a, b)
    if a is not None and b is not None:
        assert m is not None
        assert fit_in_max_undef(a, {k: v for k, v in m.items() if v >= 0})
        assert all(m[k] <= a[k] for k in a) and all(m[k] <= b[k] for k in b)


@settings(max_examples=200)
@given(ANY_AMOUNT, ANY_AMOUNT)
def test_property_add_sub_clamp_within_int64(x: int, y: int) -> None:
    s = add({"a": x}, {"a": y})["a"]
    d = sub({"a": x}, {"a": y})["a"]
    assert s == max(INT64_MIN, min(INT64_MAX, x + y))
    assert d == max(INT64_MIN, min(INT64_MAX, x - y))
