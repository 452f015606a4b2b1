"""Typed journal events: the JSON form round-trips, the written-out encoders of the hot events equal the
generic one, and a malformed event is refused with the type and field named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import quotaplane.events as E
from quotaplane.resources import Resource

names = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=6)
resources = st.dictionaries(names, st.integers(0, 2**62), max_size=3).map(Resource)


@given(app=names, key=names, resource=resources, priority=st.integers(-5, 5), flags=st.tuples(
    st.booleans(), st.booleans()), task_group=st.none() | names, t=st.floats(0, 1e9),
    preempted=st.none() | st.lists(names, max_size=3).map(tuple))
def test_allocated_fast_encoder_equals_the_generic_one_and_round_trips(
        app: str, key: str, resource: Resource, priority: int, flags: tuple[bool, bool],
        task_group: str | None, t: float, preempted: tuple[str, ...] | None) -> None:
    ev = E.Allocated(app=app, key=key, resource=resource, priority=priority, preemptible=flags[0],
                     placeholder=flags[1], task_group=task_group, t=t, preempted=preempted)
    assert ev.to_json() == E.Event.to_json(ev)
    assert E.decode(ev.to_json()) == ev


@given(key=names, t=st.floats(0, 1e9))
def test_released_fast_encoder_equals_the_generic_one(key: str, t: float) -> None:
    ev = E.Released(key=key, t=t)
    assert ev.to_json() == E.Event.to_json(ev) == {"type": "released", "key": key, "t": t}
    assert E.decode(ev.to_json()) == ev


def test_optional_fields_are_left_out_while_none() -> None:
    assert E.ConfigApplied(seq=3).to_json() == {"type": "config", "seq": 3}
    ask = E.AskAdded(key="k", app="a", resource=Resource({"vcore": 1}), seq=1, t=2.0)
    assert "placeholder" not in ask.to_json() and "task_group" not in ask.to_json()


@pytest.mark.parametrize(("event", "message"), [
    ({"type": "nope"}, "unknown event type 'nope'"),
    ({"type": "released", "t": 1.0}, "released event, field 'key'"),
    ({"type": "allocated", "app": "a", "key": "k", "resource": {"vcore": -1}, "priority": 0,
      "preemptible": True, "placeholder": False, "task_group": None, "t": 1.0}, "field 'resource'"),
    ({"type": "app_removed", "app": "a", "t": "soon"}, "app_removed event, field 't'"),
    (["released"], "must be a JSON object"),
])
def test_a_malformed_event_names_its_type_and_field(event: object, message: str) -> None:
    with pytest.raises(E.EventFormatError, match=message):
        E.decode(event)  # type: ignore[arg-type]


@given(app=names, key=names, resource=resources, priority=st.integers(-5, 5), flags=st.tuples(
    st.booleans(), st.booleans()), task_group=st.none() | names, t=st.floats(0, 1e9),
    preempted=st.none() | st.lists(names, max_size=3).map(tuple))
def test_allocated_fast_decoder_equals_the_generic_one(
        app: str, key: str, resource: Resource, priority: int, flags: tuple[bool, bool],
        task_group: str | None, t: float, preempted: tuple[str, ...] | None) -> None:
    data = E.Allocated(app=app, key=key, resource=resource, priority=priority, preemptible=flags[0],
                       placeholder=flags[1], task_group=task_group, t=t, preempted=preempted).to_json()
    assert E.Allocated.from_json(data) == E._generic_from_json(E.Allocated, data)
    released = {"type": "released", "key": key, "t": t}
    assert E.Released.from_json(released) == E._generic_from_json(E.Released, released)


@pytest.mark.parametrize("bad", [
    {"priority": True}, {"resource": {"vcore": -1}}, {"resource": {"vcore": 1.5}}, {"t": float("nan")},
    {"preempted": "k"}, {"task_group": 3}, {"app": ""},
])
def test_the_fast_decoder_defers_every_oddity_to_the_generic_one(bad: dict[str, object]) -> None:
    good = {"type": "allocated", "app": "a", "key": "k", "resource": {"vcore": 1}, "priority": 0,
            "preemptible": True, "placeholder": False, "task_group": None, "t": 1.0}
    data = {**good, **bad}
    try:
        want: object = E._generic_from_json(E.Allocated, data)
    except E.EventFormatError as exc:
        want = str(exc)
    try:
        got: object = E.Allocated.from_json(data)
    except E.EventFormatError as exc:
        got = str(exc)
    assert got == want


asks = st.builds(
    E.AskAdded, key=names, app=names, resource=resources, priority=st.integers(-5, 5),
    preemptible=st.booleans(), seq=st.integers(0, 10**6), t=st.floats(0, 1e9) | st.integers(0, 10**6),
    placeholder=st.none() | st.just(True), task_group=st.none() | names,
    places=st.none() | st.lists(names, max_size=3).map(tuple), overtaken=st.none() | st.integers(0, 9),
    tags=st.none() | st.dictionaries(names, names, max_size=2),
    constraints=st.none() | st.dictionaries(names, st.lists(names, max_size=2), max_size=2),
    max_runtime=st.none() | st.floats(1, 1e6))


@given(ask=asks)
def test_ask_added_fast_encoder_and_decoder_equal_the_generic_ones(ask: E.AskAdded) -> None:
    """Issue 38: a snapshot restore decodes and dumps every waiting ask through the written-out pair."""
    data = ask.to_json()
    assert data == E.Event.to_json(ask)
    assert E.AskAdded.from_json(data) == E._generic_from_json(E.AskAdded, data)
    assert E.decode(data) == E._generic_from_json(E.AskAdded, data)


@pytest.mark.parametrize("bad", [
    {"priority": True}, {"resource": {"vcore": -1}}, {"resource": {"vcore": 1.5}}, {"t": float("nan")},
    {"seq": "1"}, {"preemptible": 1}, {"key": 3}, {"placeholder": "yes"}, {"tags": []}, {"t": 2},
    {"places": "q:root.a"}, {"places": [1]}, {"places": None}, {"overtaken": True}, {"overtaken": "2"},
    {"places": ["q:root.a"], "overtaken": 1.0}, {"places": ["q:root.a"], "overtaken": 2},
])
def test_the_ask_fast_decoder_defers_every_oddity_to_the_generic_one(bad: dict[str, object]) -> None:
    good = {"type": "ask_added", "key": "k", "app": "a", "resource": {"vcore": 1}, "priority": 0,
            "preemptible": True, "seq": 1, "t": 1.0}
    for data in ({**good, **bad}, {k: v for k, v in good.items() if k not in bad or k == "type"}):
        try:
            want: object = E._generic_from_json(E.AskAdded, data)
        except E.EventFormatError as exc:
            want = str(exc)
        try:
            got: object = E.AskAdded.from_json(data)
        except E.EventFormatError as exc:
            got = str(exc)
        assert got == want
