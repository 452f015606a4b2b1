"""One error hierarchy (issue 29 item 6): every error quotaplane raises on purpose is a
``quotaplane.errors.QuotaplaneError``; bad input is an ``InputError``, which is also a ``ValueError``
(so callers that know only the standard library keep working); the engines and the journal re-export
their own from there; and the library raises no bare ``ValueError`` on bad input."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import quotaplane as qp
import quotaplane.errors as errors

SRC = Path(qp.__file__).parent


def _classes() -> list[type[BaseException]]:
    return [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, BaseException)]


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.__name__)
def test_every_error_is_a_quotaplane_error_with_a_docstring(cls: type[BaseException]) -> None:
    assert issubclass(cls, errors.QuotaplaneError)
    assert cls.__doc__ and cls.__doc__.strip()
    assert cls.__name__ in errors.__all__


@pytest.mark.parametrize("cls", [errors.ConfigError, errors.ConflictError, errors.RejectedError,
                                 errors.PlacementError, errors.QuotaValidationError, errors.QuotaError,
                                 errors.ReleaseError, errors.EventFormatError])
def test_bad_input_is_an_input_error_and_a_value_error(cls: type[BaseException]) -> None:
    assert issubclass(cls, errors.InputError) and issubclass(cls, ValueError)


def test_the_old_homes_name_the_same_classes() -> None:
    import quotaplane.elastic as elastic
    import quotaplane.events as events
    import quotaplane.forest as forest
    import quotaplane.journal as journal
    import quotaplane.journal.group_commit as group_commit
    import quotaplane.placement as placement

    assert elastic.QuotaValidationError is errors.QuotaValidationError
    assert forest.QuotaError is errors.QuotaError
    assert placement.PlacementError is errors.PlacementError
    assert events.EventFormatError is errors.EventFormatError
    assert journal.JournalError is errors.JournalError
    assert journal.JournalCompactedError is errors.JournalCompactedError
    assert issubclass(errors.JournalCompactedError, LookupError)
    assert group_commit.CommitFailedError is errors.CommitFailedError
    assert issubclass(errors.NotFoundError, KeyError)
    assert qp.InputError is errors.InputError


def test_bad_input_names_what_and_where() -> None:
    with pytest.raises(errors.InputError, match="memory"):
        qp.Resource.from_config({"memory": "12 GB"})
    p = qp.Scheduler.from_yaml("partitions: [{name: default, queues: [{name: root}]}]").partition("default")
    with pytest.raises(errors.InputError, match="priority"):
        p.allocate("app", "k", {"vcore": 1}, priority="high")  # type: ignore[arg-type]


#: the faces keep their own request errors (HTTP bodies, CLI lines, trace files)
FACES = ("server", "kube", "sim", "cli.py", "cli_remote.py", "client.py", "_client_api.py", "console.py",
         "units.py")


def test_the_library_raises_no_bare_value_error() -> None:
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(FACES):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and \
                    isinstance(node.exc.func, ast.Name) and node.exc.func.id == "ValueError":
                found.append(f"{rel}:{node.lineno}")
    assert not found, f"raise an InputError (quotaplane.errors) on bad input: {found}"
