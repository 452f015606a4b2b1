"""An ASGI app served by a real uvicorn on a local port, in a thread (tests that need real TCP)."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn

from tests.kube.emulator import free_port


class LiveServer:
    """Serve ``app`` on 127.0.0.1 (``port``, or a free one) until :meth:`stop`. Like ``quotaplane
    serve``, open event streams are cut at shutdown (there after 5 s, here after 1 s)."""

    def __init__(self, app: Any, port: int | None = None, *, lifespan: str = "on") -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning", lifespan=lifespan,
                                                    timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)

    def stop(self) -> None:
        """Shut the server down and wait for its thread."""
        self.server.should_exit = True
        self.thread.join(10)
