"""Quantity parsing: YuniKorn config Q-1 … Q-6 and Kubernetes K8-1 / K8-2 (reference §1.2, §1.14)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaplane.resources import INT64_MAX, Resource, parse_k8s_quantity, parse_quantity, parse_vcore

# -- grammar -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("10", 10), (" 25  k ", 25_000), ("25k", 25_000), ("\t7\n", 7), ("007", 7),
])
def test_q1_grammar_accepts(text: str, value: int) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", " ", "-1", "+1", "1.5", "1e3", "1,000", "k", "0x10", "1 k i", "1 2",
                                  "1kk", "١٢"])
def test_q1_grammar_rejects_with_invalid_quantity(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(text)


# -- multipliers -------------------------------------------------------------------------------
@pytest.mark.parametrize(("suffix", "multiplier"), [
    ("", 1), ("k", 10**3), ("M", 10**6), ("G", 10**9), ("T", 10**12), ("P", 10**15), ("E", 10**18),
    ("Ki", 2**10), ("Mi", 2**20), ("Gi", 2**30), ("Ti", 2**40), ("Pi", 2**50), ("Ei", 2**60),
])
def test_q2_every_multiplier(suffix: str, multiplier: int) -> None:
    assert parse_quantity(f"3{suffix}") == 3 * multiplier
    assert parse_quantity(f"3 {suffix}") == 3 * multiplier


@pytest.mark.parametrize("suffix", ["K", "ki", "mi", "Mii"])
def test_q2_suffixes_the_regex_lets_through_but_are_not_multipliers(suffix: str) -> None:
    with pytest.raises(ValueError, match="invalid"):
        parse_quantity(f"1{suffix}")


def test_q2_suffix_errors_name_invalid_suffix() -> None:
    with pytest.raises(ValueError, match="invalid suffix 'K'"):
        parse_quantity("1K")


# -- m only for vcore --------------------------------------------------------------------------
def test_q3_m_is_an_invalid_suffix_outside_vcore() -> None:
    with pytest.raises(ValueError, match="invalid suffix 'm'"):
        parse_quantity("500m")
    with pytest.raises(ValueError, match="memory"):
        Resource.from_config({"memory": "500m"})


# -- vcore in milli ----------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "value"), [
    ("1", 1000), ("500m", 500), ("2k", 2_000_000), ("2Ki", 2_048_000), ("0", 0), ("0m", 0),
    ("9223372036854775", 9_223_372_036_854_775_000), ("9223372036854775807m", INT64_MAX),
])
def test_q4_parse_vcore_reference_examples(text: str, value: int) -> None:
    assert parse_vcore(text) == value


def test_q4_only_the_name_vcore_is_converted() -> None:
    r = Resource.from_config({"vcore": "2", "cpu": "2", "vcores": "2", "memory": 2, "nvidia.com/gpu": 1})
    assert r.to_dict() == {"cpu": 2, "memory": 2, "nvidia.com/gpu": 1, "vcore": 2000, "vcores": 2}


def test_q4_mi_is_invalid_for_vcore() -> None:
    with pytest.raises(ValueError, match="invalid suffix"):
        parse_vcore("1mi")


# -- overflow ----------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["9223372036854775808", "1000E", "9999999999999999999999", "16Ei"])
def test_q5_parse_quantity_overflow(text: str) -> None:
    with pytest.raises(ValueError, match="overflow") as info:
        parse_quantity(text)
    assert text in str(info.value)


@pytest.mark.parametrize("text", ["9223372036854776", "1000P", "7E", "7Ei", "9223372036854775808m"])
def test_q5_parse_vcore_overflow(text: str) -> None:
    with pytest.raises(ValueError, match="overflow") as info:
        parse_vcore(text)
    assert text in str(info.value)


def test_q5_max_values_are_accepted() -> None:
    assert parse_quantity("9223372036854775807") == INT64_MAX
    assert parse_quantity("7Ei") == 7 * 2**60
    assert parse_quantity("9E") == 9 * 10**18


def test_q5_huge_digit_strings_are_overflow_naming_the_value() -> None:
    huge = "1" * 5000
    with pytest.raises(ValueError, match="overflow"):
        parse_quantity(huge)
    with pytest.raises(ValueError, match="overflow"):
        parse_vcore(huge + "m")


def test_q5_leading_zeros_do_not_count_towards_overflow() -> None:
    assert parse_quantity("0" * 5000 + "12") == 12
    assert parse_vcore("0" * 30 + "5") == 5000


# -- error strings -----------------------------------------------------------------------------
def test_q6_error_strings() -> None:
    with pytest.raises(ValueError, match=r"^invalid quantity '1\.5'$"):
        parse_quantity("1.5")
    with pytest.raises(ValueError, match=r"^invalid suffix 'K' in quantity '1K'$"):
        parse_quantity("1K")
    with pytest.raises(ValueError, match=r"^invalid quantity: overflow '1000E'$"):
        parse_quantity("1000E")


def test_from_config_errors_name_resource_and_text() -> None:
    with pytest.raises(ValueError, match="resource 'memory': invalid quantity '12 GB'"):
        Resource.from_config({"memory": "12 GB"})
    for bad in (1.5, True, None, [1], -1):
        with pytest.raises(ValueError, match="resource 'x'"):
            Resource.from_config({"x": bad})
    with pytest.raises(ValueError):
        Resource.from_config({"": 1})
    with pytest.raises(ValueError):
        Resource.from_config(["vcore"])  # type: ignore[arg-type]
    assert Resource.from_config(None) == {}
    assert Resource.from_config({"memory": 10, "vcore": "500m"}).to_dict() == {"memory": 10, "vcore": 500}


# -- K8-1 / K8-2 ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("cpu", "vcore"), [
    ("0.5", 500), ("0.33", 330), ("100m", 100), ("1", 1000), (2, 2000), ("1.0005", 1001), ("1n", 1),
    ("250m", 250), ("1e3", 1_000_000), (0.25, 250), ("1k", 1_000_000),
])
def test_k8_1_cpu_becomes_vcore_milli_rounded_up(cpu: object, vcore: int) -> None:
    assert Resource.from_k8s({"cpu": cpu}) == {"vcore": vcore}


@pytest.mark.parametrize(("text", "value"), [
    ("129M", 129_000_000), ("123Mi", 128_974_848), ("1Gi", 1_073_741_824), ("100m", 1), ("1.5", 2),
    ("500M", 500_000_000), ("1024M", 1_024_000_000), ("2Ki", 2048), ("1E", 10**18), ("3", 3),
])
def test_k8_1_other_names_take_value_rounded_up(text: str, value: int) -> None:
    assert Resource.from_k8s({"memory": text}) == {"memory": value}


def test_k8_1_names_are_kept_except_cpu() -> None:
    r = Resource.from_k8s({"cpu": "250m", "memory": "1Gi", "hugepages-1Gi": "1", "nvidia.com/gpu": 2})
    assert r.to_dict() == {"hugepages-1Gi": 1, "memory": 1_073_741_824, "nvidia.com/gpu": 2, "vcore": 250}


def test_k8_2_parse_keeps_sign_and_exact_value() -> None:
    assert parse_k8s_quantity("-10") == -10
    assert parse_k8s_quantity("0.33") == Fraction(33, 100)
    assert parse_k8s_quantity("1.5Gi") == Fraction(3, 2) * 2**30
    assert parse_k8s_quantity("5e-3") == Fraction(5, 1000)
    assert parse_k8s_quantity(".5") == Fraction(1, 2)


@pytest.mark.parametrize("text", ["64MiB", "1.2.3", "abc", "", "1 Gi", "--1", "1e", "Gi", "0x10"])
def test_k8_2_bad_quantities(text: str) -> None:
    with pytest.raises(ValueError) as info:
        Resource.from_k8s({"memory": text})
    assert "memory" in str(info.value)


def test_k8_negative_and_overflow_are_errors_in_from_k8s() -> None:
    with pytest.raises(ValueError, match="negative"):
        Resource.from_k8s({"cpu": "-10"})
    with pytest.raises(ValueError, match="overflow"):
        Resource.from_k8s({"memory": "9Ei"})
    with pytest.raises(ValueError, match="overflow"):
        Resource.from_k8s({"cpu": "9223372036854776"})
    with pytest.raises(ValueError):
        Resource.from_k8s({"memory": "1e99"})
    with pytest.raises(ValueError):
        Resource.from_k8s({"memory": float("nan")})
    with pytest.raises(ValueError):
        Resource.from_k8s({"memory": True})


# -- properties: parsers raise nothing but ValueError -------------------------------------------------
QUANTITY_TEXT = st.text(alphabet=st.sampled_from([*"0123456789 .+-eEmkKMGTPiEnu\t", "١", "\u2003"]),
                        max_size=25) | st.text(max_size=25)


@settings(max_examples=300)
@given(QUANTITY_TEXT)
def test_property_config_parsers_raise_only_value_error(text: str) -> None:
    for parse in (parse_quantity, parse_vcore):
        try:
            value = parse(text)
        except ValueError:
            continue
        assert isinstance(value, int) and 0 <= value <= INT64_MAX


@settings(max_examples=300)
@given(QUANTITY_TEXT | st.integers() | st.floats() | st.none() | st.booleans())
def test_property_k8s_parsers_raise_only_value_error(raw: object) -> None:
    try:
        r = Resource.from_k8s({"cpu": raw, "memory": raw})
    except ValueError:
        return
    assert all(0 <= v <= INT64_MAX for v in r.values())


@settings(max_examples=200)
@given(st.dictionaries(st.text(max_size=5) | st.integers(), QUANTITY_TEXT | st.integers() | st.floats(),
                       max_size=4))
def test_property_from_config_raises_only_value_error(mapping: dict[object, object]) -> None:
    try:
        r = Resource.from_config(mapping)  # type: ignore[arg-type]
    except ValueError:
        return
    assert all(0 <= v <= INT64_MAX for v in r.values())


@settings(max_examples=200)
@given(st.integers(min_value=0, max_value=INT64_MAX))
def test_property_integers_round_trip_through_config_text(n: int) -> None:
    assert parse_quantity(str(n)) == n
    assert Resource.from_config({"memory": n}) == {"memory": n}
