"""Bad input met while serving raises the quotaplane.errors hierarchy (InputError, a ValueError, so
callers catching ValueError are unchanged), naming what is wrong and where — answered 400."""

from __future__ import annotations

import pytest

from quotaplane.errors import InputError
from quotaplane.server.errors import status_for
from quotaplane.server.routes_asks import _last_event_id


@pytest.mark.parametrize(("header", "said"), [("abc", "'abc'"), ("-3", "-3")])
def test_a_bad_last_event_id_is_an_input_error_naming_the_header(header: str, said: str) -> None:
    with pytest.raises(InputError, match="Last-Event-ID") as err:
        _last_event_id(header)
    assert said in str(err.value) and isinstance(err.value, ValueError)
    assert status_for(err.value) == 400


def test_a_good_or_absent_last_event_id() -> None:
    assert (_last_event_id(None), _last_event_id(" "), _last_event_id(" 42 ")) == (None, None, 42)
