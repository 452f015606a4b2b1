"""The piecewise snapshot encoder is the canonical encoder, byte for byte (its slow twin).

Snapshots are encoded piece by piece so that a snapshot written on a worker thread does not hold the
interpreter lock for a quarter of a second (quotaplane.journal.base.canonical_json_pieces); the text
must stay exactly the canonical JSON a restore and every other store expect.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaplane.journal.base import _PIECE, canonical_json, canonical_json_pieces, check_state
from quotaplane.resources import Resource

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
keys = st.one_of(st.text(max_size=6), st.integers(-50, 50))


def _values(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # sizes on both sides of the piece threshold, so both paths are taken
    return st.one_of(st.lists(children, max_size=3),
                     st.dictionaries(st.text(max_size=6), children, max_size=3),
                     st.lists(scalars, min_size=_PIECE - 1, max_size=_PIECE + 40),
                     st.dictionaries(keys, scalars, min_size=_PIECE - 1, max_size=_PIECE + 40),
                     st.tuples(children, children))


json_values = st.recursive(scalars, _values, max_leaves=40)


@settings(max_examples=60, deadline=None)
@given(json_values)
def test_the_pieces_are_the_canonical_text(value: Any) -> None:
    try:
        expected = canonical_json(value)
    except ValueError:              # e.g. str and int keys in one dict: neither can sort them
        with pytest.raises(ValueError, match="not JSON-able"):
            canonical_json_pieces(value)
        return
    assert canonical_json_pieces(value) == expected


def test_large_containers_nested_and_mappings_are_encoded_like_the_canonical_encoder() -> None:
    allocations = {f"k{i:05d}": {"resource": Resource({"vcore": i}), "time": i / 3, "tags": ("a", "b")}
                   for i in range(3 * _PIECE, 0, -1)}
    state = {"rebuild": [{"type": "allocated", "key": k, "resource": v["resource"]}
                         for k, v in allocations.items()],
             "dump": {"allocations": allocations, "applications": {}}, "config_seq": 4}
    assert check_state(state) == canonical_json(state)


def test_what_is_not_json_is_refused_as_the_canonical_encoder_refuses_it() -> None:
    big = {f"k{i}": i for i in range(_PIECE + 1)}
    big["bad"] = object()                                   # type: ignore[assignment]
    with pytest.raises(ValueError, match="not JSON-able"):
        canonical_json_pieces(big)
    with pytest.raises(ValueError, match="snapshot state is not JSON-able"):
        check_state({"x": [float("nan")] * (_PIECE + 1)})
