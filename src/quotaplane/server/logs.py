"""Logging of ``quotaplane serve`` (issue 17 #2): the level, text or JSON lines, and the access log.

``text`` is ``time logger level message``; ``json`` writes one object per line —
``{"time", "level", "logger", "message"}`` plus the record's extra fields (the access log's
``method``, ``path``, ``status``, ``duration_ms``, ``client``) — for log collectors. The access log is
the ``quotaplane.access`` logger at INFO, one line per request, written by the service's outer
middleware once the answer is sent; it is off unless asked for (it costs a line per decision).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from quotaplane.errors import InputError

__all__ = ["ACCESS", "LOG_FORMATS", "JsonFormatter", "configure_logging"]

#: the access log's logger
ACCESS = logging.getLogger("quotaplane.access")
LOG_FORMATS = ("text", "json")
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                    + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(level: str = "warning", fmt: str = "text", access_log: bool = False) -> None:
    """Set the root logger's level and format (stderr), and turn the access log on or off."""
    if fmt not in LOG_FORMATS:
        raise InputError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {fmt!r}")
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise InputError(f"unknown log level {level!r} (debug, info, warning, error)")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(numeric)
    ACCESS.setLevel(logging.INFO if access_log else logging.WARNING)
    ACCESS.disabled = not access_log
