"""Human units (issue 30, "what people expect" 1): what a person reads and types."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quotaplane.resources import INT64_MAX
from quotaplane.units import UNLIMITED_FROM, amount, parse_resources, percent, resources


@pytest.mark.parametrize(("r", "text"), [
    ({"vcore": 200000, "memory": 858993459200}, "200 cores, 800 Gi"),
    ({"vcore": 2500, "memory": 25000000000}, "2.5 cores, 23.3 Gi"),
    ({"vcore": 1000, "pods": 1}, "1 core, 1 pod"),
    ({"vcore": 1, "memory": 1000}, "0.001 cores, 1000 B"),
    ({"nvidia.com/gpu": 8, "vcore": 4000}, "4 cores, 8 GPUs"),
    ({"amd.com/gpu": 1}, "1 GPU"),
    ({"ephemeral-storage": 10 * 2**30, "widgets": 12000}, "ephemeral-storage 10 Gi, widgets 12,000"),
    ({"vcore": INT64_MAX // 5, "memory": INT64_MAX}, "cores unlimited, memory unlimited"),
    ({"memory": 1600 * 2**30}, "1,600 Gi"),                  # a whole number of Gi, not 1.56 Ti
    ({"memory": 3 * 2**40}, "3 Ti"),
    ({}, "-"),
])
def test_resources_read_as_a_person_reads_them(r: dict[str, int], text: str) -> None:
    assert resources(r) == text


@given(st.dictionaries(st.sampled_from(["vcore", "memory", "pods", "nvidia.com/gpu", "x"]),
                       st.integers(0, INT64_MAX)))
def test_the_unlimited_sentinel_is_never_printed_as_a_number(r: dict[str, int]) -> None:
    text = resources(r)
    assert not any(int(n.replace(",", "")) >= UNLIMITED_FROM for n in re.findall(r"[0-9][0-9,]*", text))
    for name, value in r.items():
        assert ("unlimited" in amount(name, value)) == (value >= UNLIMITED_FROM)


def test_percent() -> None:
    assert (percent(2500, 5000), percent(1, 1000), percent(6000, 5000)) == ("50%", "<1%", "120%")
    assert percent(5, 0) == percent(5, None) == percent(5, INT64_MAX) == ""


@pytest.mark.parametrize(("words", "parsed"), [
    (["cpu=2", "memory=1Gi"], {"vcore": 2000, "memory": 2**30}),
    (["vcore=2"], {"vcore": 2000}),                         # the configuration's vcore: cores
    (["vcore=500m", "memory=4G"], {"vcore": 500, "memory": 4 * 10**9}),
    (["cpu=0.25", "memory=1.5Gi"], {"vcore": 250, "memory": 3 * 2**29}),
    (["vcore=0.5"], {"vcore": 500}),
    (["nvidia.com/gpu=1", "pods=3"], {"nvidia.com/gpu": 1, "pods": 3}),
])
def test_quantities_are_read_as_the_configuration_and_kubernetes_read_them(
        words: list[str], parsed: dict[str, int]) -> None:
    assert parse_resources(words) == parsed


@pytest.mark.parametrize(("words", "message"), [
    (["cpu"], "'cpu': expected NAME=QUANTITY"),
    (["=2"], "expected NAME=QUANTITY"),
    (["cpu=abc"], "'cpu=abc': not a quantity"),
    (["memory=-1"], "'memory=-1': not a quantity"),
    (["cpu=1", "vcore=2"], "'vcore=2': vcore is given twice"),
    # found trying the product as a new user: a fraction of a counted resource was rounded up, silently
    (["nvidia.com/gpu=1.5"], "'nvidia.com/gpu=1.5': nvidia.com/gpu is counted in whole units"),
    (["pods=2.5"], "'pods=2.5': pods is counted in whole units"),
    (["nvidia.com/gpu=500m"], "counted in whole units"),
    (["memory=8GB"], "'memory=8GB': not a quantity (bytes: for example 8G = 8,000,000,000 or 8Gi"),
])
def test_a_bad_quantity_names_the_word(words: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_resources(words)


@given(st.integers(0, 10**9))
def test_whole_cores_round_trip(cores: int) -> None:
    assert parse_resources([f"vcore={cores}"]) == {"vcore": cores * 1000}
    assert amount("vcore", cores * 1000) == f"{cores:,} {'core' if cores == 1 else 'cores'}"
