"""A TCP proxy the fault tests control: between the service instances and PostgreSQL (or anything).

``FaultProxy(target_host, target_port)`` listens on a free local port and relays every connection
to the target, byte for byte, until told otherwise:

* :meth:`freeze` — stop relaying in both directions; connections stay open and data waits (a network
  that drops packets silently, a stalled router: the peers see nothing, no error). :meth:`thaw`
  relays again what waited.
* :meth:`reset` — cut every open connection at once with a TCP reset (a database restart, a NAT or
  firewall dropping its state, a crashed middlebox).
* :meth:`refuse` — new connections are closed at once (nothing listens: the database is down) until
  :meth:`accept` again. ``restart(down)``: reset, refuse for ``down`` seconds, accept — what a client
  sees of a database restart, without restarting the shared server.

Used as a context manager it stops on exit (every thread joined, every socket closed).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
import time
from types import TracebackType

__all__ = ["FaultProxy"]

_CHUNK = 65536


class FaultProxy:
    """See the module docstring."""

    def __init__(self, target_host: str, target_port: int, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server((host, port))
        self.host, self.port = self._listener.getsockname()[:2]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._flowing = threading.Event()
        self._flowing.set()
        self._accepting = True
        self._stopped = False
        #: how many connections were cut by :meth:`reset`, and opened at all
        self.resets = 0
        self.connections = 0
        self._threads: list[threading.Thread] = []
        acceptor = threading.Thread(target=self._accept_loop, name="fault-proxy-accept", daemon=True)
        acceptor.start()
        self._threads.append(acceptor)

    # -- the levers ------------------------------------------------------------------------------------
    def freeze(self) -> None:
        """Stop relaying (connections stay open; nothing moves until :meth:`thaw`)."""
        self._flowing.clear()

    def thaw(self) -> None:
        """Relay again."""
        self._flowing.set()

    def reset(self) -> int:
        """Cut every open connection with a TCP reset; how many were cut."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                with contextlib.suppress(OSError):
                    s.close()
        self.resets += len(pairs)
        return len(pairs)

    def refuse(self) -> None:
        """Close new connections at once (as if nothing listened)."""
        self._accepting = False

    def accept(self) -> None:
        """Relay new connections again."""
        self._accepting = True

    def restart(self, down: float) -> None:
        """What a client sees of a database restart: every connection cut, none taken for ``down``
        seconds, then accepted again."""
        self.refuse()
        self.thaw()
        self.reset()
        time.sleep(down)
        self.accept()

    def stop(self) -> None:
        """Close everything and join the threads."""
        self._stopped = True
        self._flowing.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.reset()
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- relaying --------------------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._accepting:
                with contextlib.suppress(OSError):
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._pairs.append((client, upstream))
                self.connections += 1
                self._threads = [t for t in self._threads if t.is_alive()]
            t = threading.Thread(target=self._pump, args=(client, upstream), name="fault-proxy-pump",
                                 daemon=True)
            t.start()
            self._threads.append(t)

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        try:
            sel.register(a, selectors.EVENT_READ, b)
            sel.register(b, selectors.EVENT_READ, a)
            while not self._stopped:
                if not self._flowing.wait(0.2):
                    continue            # frozen: leave the data where it is
                for key, _ in sel.select(0.2):
                    if not self._flowing.is_set():
                        break
                    src = key.fileobj
                    assert isinstance(src, socket.socket)
                    data = src.recv(_CHUNK)
                    if not data:
                        return
                    key.data.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            sel.close()
            with self._lock:
                if (a, b) in self._pairs:
                    self._pairs.remove((a, b))
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()
