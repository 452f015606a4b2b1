"""What every test shares.

No test asserts on time, and the suite runs on a loaded 2-core machine in CI: a request to a local
service there may take longer than httpx's 5 s default (slow, not wrong — seen at load 15 on
``/ws/v1/metrics`` and ``/ui/``). Every httpx call that gives no timeout of its own waits up to two
minutes instead; a test that means a short timeout passes it explicitly.
"""

from __future__ import annotations

import httpx

_DEFAULT = httpx._config.DEFAULT_TIMEOUT_CONFIG     # the object every httpx default refers to
_DEFAULT.connect = _DEFAULT.read = _DEFAULT.write = _DEFAULT.pool = 120.0
