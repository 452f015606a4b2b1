"""The flavor search on its own (KQ-F2, KQ-F6, KQ-F7), against a scripted evaluator: which flavor is
taken for each combination of modes and fungibility settings, as Kueue's ``flavorassigner`` decides."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from quotaplane.config.model import FlavorConfig, FungibilityConfig, TaintConfig, TolerationConfig
from quotaplane.flavors.assign import FIT, NOFIT, PREEMPT, Attempt, choose, is_preferred, should_try_next
from quotaplane.flavors.catalog import Catalog, FlavorRequest
from quotaplane.policy import Violation
from quotaplane.resources import Resource

GPU = "nvidia.com/gpu"
CATALOG = Catalog([FlavorConfig("one", (GPU,), {"gpu": "one"}), FlavorConfig("two", (GPU,), {"gpu": "two"}),
                   FlavorConfig("three", (GPU,), {"gpu": "three"})])
TRY_NEXT = FungibilityConfig("TryNextFlavor", "TryNextFlavor")


class Script:
    """Answers the search from a table: flavor → (mode, borrowing level)."""

    def __init__(self, table: dict[str, tuple[str, int]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def _flavor(self, resource: Resource) -> str:
        return next(n.split("@")[1] for n in resource if "@" in n)

    def check(self, resource: Resource) -> list[Violation]:
        f = self._flavor(resource)
        self.asked.append(f)
        mode, _ = self.table[f]
        return [] if mode == FIT else [Violation("queue", "queue.max", "root.a", f"{f} is full")]

    def borrowing(self, resource: Resource, names: Sequence[str]) -> tuple[int, str]:
        return self.table[self._flavor(resource)][1], "root"

    def preemptable(self, resource: Resource, reasons: list[Violation]) -> bool:
        return self.table[self._flavor(resource)][0] == PREEMPT


def _choose(table: dict[str, tuple[str, int]], fung: FungibilityConfig | None = None,
            request: FlavorRequest | None = None, catalog: Catalog = CATALOG) -> tuple[str | None, Script]:
    script = Script(table)
    choice = choose(catalog, Resource({GPU: 1, "vcore": 100}), request or FlavorRequest(), None, fung, script,
                    queue="root.a")
    assert choice is not None
    return (choice.flavors.get(GPU) if choice.mode != NOFIT else None), script


def test_a_fit_without_borrowing_stops_the_search_whatever_the_fungibility() -> None:
    for fung in (None, TRY_NEXT):
        chosen, script = _choose({"one": (FIT, 0), "two": (FIT, 0), "three": (FIT, 0)}, fung)
        assert chosen == "one" and script.asked == ["one"]


def test_default_when_can_borrow_may_stop_search_takes_the_first_borrowing_flavor() -> None:
    """F-ex1 "borrow before try next flavor": the default takes flavor one, borrowing."""
    chosen, script = _choose({"one": (FIT, 1), "two": (FIT, 0), "three": (FIT, 0)})
    assert chosen == "one" and script.asked == ["one"]


def test_try_next_flavor_finds_a_flavor_without_borrowing() -> None:
    """F-ex2 "borrow try next flavor, found the second flavor"."""
    chosen, _ = _choose({"one": (FIT, 1), "two": (FIT, 0), "three": (FIT, 0)}, TRY_NEXT)
    assert chosen == "two"


def test_try_next_flavor_falls_back_to_the_remembered_borrowing_flavor() -> None:
    """F-ex3 "borrow try next flavor, found the first flavor": two and three do not fit at all."""
    chosen, script = _choose({"one": (FIT, 1), "two": (NOFIT, 0), "three": (NOFIT, 0)}, TRY_NEXT)
    assert chosen == "one" and script.asked == ["one", "two", "three"]


def test_default_when_can_preempt_tries_the_next_flavor() -> None:
    # whencanpreempt defaults to TryNextFlavor: a later flavor that fits by borrowing wins
    chosen, _ = _choose({"one": (PREEMPT, 0), "two": (FIT, 1), "three": (NOFIT, 0)})
    assert chosen == "two"
    # nothing better: the preempting flavor is taken
    chosen, _ = _choose({"one": (PREEMPT, 0), "two": (NOFIT, 0), "three": (NOFIT, 0)})
    assert chosen == "one"


def test_when_can_preempt_may_stop_search_takes_the_preempting_flavor() -> None:
    chosen, script = _choose({"one": (PREEMPT, 0), "two": (FIT, 0), "three": (FIT, 0)},
                             FungibilityConfig("MayStopSearch", "MayStopSearch"))
    assert chosen == "one" and script.asked == ["one"]


@pytest.mark.parametrize(("preference", "expected"), [
    # KQ-F7: (Fit, Borrow) before (Preempt, NoBorrow) by default ...
    ("", "one"), ("BorrowingOverPreemption", "one"),
    # ... and the reverse with PreemptionOverBorrowing
    ("PreemptionOverBorrowing", "two"),
])
def test_preference_between_borrowing_and_preemption(preference: str, expected: str) -> None:
    fung = FungibilityConfig("TryNextFlavor", "TryNextFlavor", preference)
    chosen, _ = _choose({"one": (FIT, 1), "two": (PREEMPT, 0), "three": (NOFIT, 0)}, fung)
    assert chosen == expected


def test_is_preferred_orders_as_kueue() -> None:
    """F-ex4 (``TestIsPreferred``): the documented orders, ties keep the earlier flavor."""
    fit0, fit1 = Attempt("a", FIT, 0), Attempt("b", FIT, 1)
    pre0, pre1 = Attempt("c", PREEMPT, 0), Attempt("d", PREEMPT, 1)
    nofit = Attempt("e", NOFIT, 0)
    bop = FungibilityConfig("TryNextFlavor", "TryNextFlavor", "BorrowingOverPreemption")
    pob = FungibilityConfig("TryNextFlavor", "TryNextFlavor", "PreemptionOverBorrowing")
    for order, fung in (([fit0, fit1, pre0, pre1], bop), ([fit0, pre0, fit1, pre1], pob)):
        for i, better in enumerate(order):
            for worse in order[i + 1:]:
                assert is_preferred(better, worse, fung) and not is_preferred(worse, better, fung)
            assert is_preferred(better, nofit, fung) and not is_preferred(nofit, better, fung)
            assert not is_preferred(better, better, fung)
    assert is_preferred(fit0, None, bop) and not is_preferred(nofit, None, bop)


def test_should_try_next() -> None:
    default = FungibilityConfig()
    assert should_try_next(NOFIT, 0, default)
    assert should_try_next(PREEMPT, 0, default)              # whencanpreempt: TryNextFlavor by default
    assert not should_try_next(FIT, 3, default)              # whencanborrow: MayStopSearch by default
    assert should_try_next(FIT, 1, TRY_NEXT) and not should_try_next(FIT, 0, TRY_NEXT)


def test_node_selector_and_affinity_only_compare_the_flavors_own_labels() -> None:
    """KQ-F2: a selector on a label the flavor does not define is ignored; one it contradicts skips it."""
    chosen, script = _choose({"one": (FIT, 0), "two": (FIT, 0), "three": (FIT, 0)},
                             request=FlavorRequest({"gpu": "two", "zone": "a"}))
    assert chosen == "two" and script.asked == ["two"]
    term = (("gpu", "In", ("three",)), ("zone", "In", ("b",)))
    chosen, _ = _choose({"one": (FIT, 0), "two": (FIT, 0), "three": (FIT, 0)},
                        request=FlavorRequest(affinity=(term,)))
    assert chosen == "three"
    only_zone = (("zone", "In", ("b",)),)         # a term with no key of the flavor matches every flavor
    chosen, _ = _choose({"one": (FIT, 0), "two": (FIT, 0), "three": (FIT, 0)},
                        request=FlavorRequest(affinity=(only_zone,)))
    assert chosen == "one"


def test_taints_need_a_toleration_unless_the_flavor_tolerates_them() -> None:
    taint = TaintConfig("dedicated", "gpu", "NoSchedule")
    catalog = Catalog([FlavorConfig("one", (GPU,), {}, (taint,)),
                       FlavorConfig("two", (GPU,), {}, (TaintConfig("x", "", "PreferNoSchedule"),)),
                       FlavorConfig("three", (GPU,), {}, (taint,),
                                    (TolerationConfig("dedicated", "Exists"),))])
    table = {"one": (FIT, 0), "two": (FIT, 0), "three": (FIT, 0)}
    assert _choose(table, catalog=catalog)[0] == "two"          # PreferNoSchedule is ignored
    tolerant = FlavorRequest(tolerations=(TolerationConfig("dedicated", "Equal", "gpu", "NoSchedule"),))
    assert _choose(table, request=tolerant, catalog=catalog)[0] == "one"
    only_three = Catalog([catalog.flavors["one"], catalog.flavors["three"]])
    assert _choose({"one": (FIT, 0), "three": (FIT, 0)}, catalog=only_three)[0] == "three"


def test_no_usable_flavor_refuses_with_every_reason() -> None:
    script = Script({"one": (NOFIT, 0), "two": (NOFIT, 0), "three": (NOFIT, 0)})
    choice = choose(CATALOG, Resource({GPU: 1}), FlavorRequest({"gpu": "two"}), None, None, script,
                    queue="root.a")
    assert choice is not None and choice.mode == NOFIT and choice.flavors == {}
    codes = [(v.code, v.message.split(":")[0]) for v in choice.reasons()]
    assert codes[1] == ("queue.max", "flavor two")
    assert codes[0][0] == "flavor.nomatch" and codes[2][0] == "flavor.nomatch"
    assert [a.summary() for a in choice.attempts][1] == "no two quota left (queue.max at root.a)"


def test_a_request_for_nothing_counted_per_flavor_is_not_flavored() -> None:
    assert choose(CATALOG, Resource({"vcore": 1}), FlavorRequest(), None, None, Script({}), queue="q") is None
