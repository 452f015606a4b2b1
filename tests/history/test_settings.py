"""The ``history`` settings of a partition: every wrong value is one error naming the key, the line and
the partition, and nothing loads (docs/history.md "Settings"); the defaults and a full setting parse."""

from __future__ import annotations

from decimal import Decimal

import pytest

import quotaplane as qp
from quotaplane.config.history import parse_settings
from quotaplane.errors import ConfigError

BASE = """partitions:
- name: default
  history:
{h}
  queues:
  - name: root
"""


@pytest.mark.parametrize(("setting", "says"), [
    ("timezone: Mars/Base", "history.timezone: unknown time zone 'Mars/Base'"),
    ("retention: {minute: forever}", "history.retention.minute: expected a duration"),
    ("retention: {second: 2d}", "history.retention: unknown key 'second'"),
    ("currency: 5", "history.currency: expected a text"),
    ("prices: {vcore: cheap}", "history.prices.vcore: expected a price"),
    ("borrowedprices: {vcore: -1}", "history.borrowedprices.vcore: expected a price"),
    ("fairshare: {halflife: 0s}", "history.fairshare.halflife: must be longer than 0"),
    ("fairshare: {weights: {root.a: 0}}", "history.fairshare.weights.root.a: expected a weight > 0"),
    ("fairshare: {weights: {root.a: true}}", "history.fairshare.weights.root.a: expected a weight > 0"),
    ("fairshare: {weights: {root.a: .inf}}", "history.fairshare.weights.root.a: expected a weight > 0"),
    ("fairshare: {colour: red}", "history.fairshare: unknown key 'colour'"),
    ("colour: red", "history: unknown key 'colour'"),
    ("enabled: maybe", "history.enabled: expected true or false"),
])
def test_a_wrong_setting_is_one_error_naming_it(setting: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        qp.Scheduler.from_yaml(BASE.format(h="    " + setting))
    message = str(err.value)
    assert message.startswith("line 3: ") and says in message and "(in partition 'default')" in message


def test_the_defaults_and_a_full_setting() -> None:
    default = parse_settings(None)
    assert default.enabled and default.timezone == "UTC" and not default.fairshare.enabled
    assert default.fairshare.half_life_ms == 7 * 86_400_000
    full = parse_settings({"enabled": True, "timezone": "Europe/Zurich", "retention": {"minute": "1d"},
                           "currency": "CHF", "prices": {"nvidia.com/gpu": 2.5},
                           "borrowedprices": {"nvidia.com/gpu": 4},
                           "fairshare": {"halflife": "4h", "weights": {"Root.Vision": 2}}})
    assert full.timezone == "Europe/Zurich" and full.retention["minute"] == 86_400_000
    assert full.retention["hour"] == default.retention["hour"]
    assert full.prices["nvidia.com/gpu"] == Decimal("2.5") and full.currency == "CHF"
    assert full.fairshare.enabled and full.fairshare.half_life_ms == 4 * 3_600_000
    assert dict(full.fairshare.weights) == {"root.vision": Decimal(2)}
