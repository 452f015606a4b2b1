"""A TCP proxy that adds a fixed one-way delay to every chunk in both directions (for benchmarks).

``python _latency_proxy.py LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT ONE_WAY_MS`` — used by
``benchmarks/store.py`` to put PostgreSQL "on another host" (a round trip of 2 × ONE_WAY_MS) on a
machine whose kernel has no ``netem``. Chunks keep their order: each is written ONE_WAY_MS after it
was read. Prints ``ready`` once listening.
"""

from __future__ import annotations

import asyncio
import sys


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    pending: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        while True:
            due, data = await pending.get()
            if not data:
                writer.close()
                return
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(send())
    while True:
        data = await reader.read(65536)
        pending.put_nowait((loop.time() + delay, data))
        if not data:
            break
    await sender


async def main(listen: int, host: str, port: int, delay_ms: float) -> None:
    delay = delay_ms / 1000.0

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection(host, port)
        await asyncio.gather(_pump(client_r, up_w, delay), _pump(up_r, client_w, delay),
                             return_exceptions=True)

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 5:     # `make bench` runs every script: a helper has nothing to measure
        print(__doc__.strip().splitlines()[0])
        sys.exit(0)
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
