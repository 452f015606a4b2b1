"""The one-shot encoder is its ``JSONEncoder.encode``, text for text and error for error.

Every decision encodes its journal record (canonical JSON) and its answer; ``JSONEncoder.encode``
rebuilds the C encoder on every call, :func:`quotaplane.journal.base.one_shot_encoder` calls it
directly (issue 38). Whatever it is given, it must answer exactly what ``encode`` answers.
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaplane.journal.base import _default, canonical_json, one_shot_encoder
from quotaplane.resources import Resource

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                    st.floats(), st.text(max_size=8))
keys = st.one_of(st.text(max_size=6), st.integers(-50, 50), st.floats(allow_nan=False), st.booleans(),
                 st.none())
values = st.recursive(scalars, lambda children: st.one_of(
    st.lists(children, max_size=4), st.tuples(children, children),
    st.dictionaries(keys, children, max_size=4)), max_leaves=30)

ENCODERS = [
    json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                     check_circular=True, default=_default),
    json.JSONEncoder(ensure_ascii=False, separators=(",", ":")),
    json.JSONEncoder(),
    json.JSONEncoder(check_circular=False, sort_keys=True),
]


def _outcome(encode: Any, value: Any) -> tuple[str, str]:
    try:
        return "text", encode(value)
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=150, deadline=None)
@given(values, st.sampled_from(range(len(ENCODERS))))
def test_the_one_shot_encoder_answers_what_encode_answers(value: Any, which: int) -> None:
    encoder = ENCODERS[which]
    assert _outcome(one_shot_encoder(encoder), value) == _outcome(encoder.encode, value)


def test_mappings_non_finite_floats_and_unknown_objects_as_encode_has_them() -> None:
    canonical = ENCODERS[0]
    fast = one_shot_encoder(canonical)
    event = {"type": "allocated", "resource": Resource({"vcore": 2, "memory": 5}), "t": 1.5, "é": "ü"}
    assert fast(event) == canonical.encode(event) == canonical_json(event)
    for bad in (math.nan, math.inf, {"x": [object()]}):
        assert _outcome(fast, bad) == _outcome(canonical.encode, bad)
        assert _outcome(fast, bad)[0] != "text"
    assert fast("plain") == canonical.encode("plain") == '"plain"'


def test_a_circular_value_is_refused_and_the_next_encode_is_unaffected() -> None:
    fast = one_shot_encoder(ENCODERS[1])
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        fast(loop)
    shared = {"a": 1}
    assert fast([shared, shared]) == '[{"a":1},{"a":1}]'       # the same object twice is no circle


def test_threads_encoding_the_same_object_at_once_never_see_a_false_circle() -> None:
    # a snapshot is encoded on a worker thread while the loop encodes events holding the same objects
    fast = one_shot_encoder(ENCODERS[0])
    shared = Resource({"vcore": 1})
    value = [{"r": shared, "i": i} for i in range(300)]
    expected = canonical_json(value)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(60):
                assert fast(value) == expected
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_an_indent_keeps_the_encoders_own_method() -> None:
    encoder = json.JSONEncoder(indent=2)
    assert one_shot_encoder(encoder) == encoder.encode
