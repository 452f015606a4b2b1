"""Child process of the crash test: appends events forever, printing each acknowledged seq.

Usage: python _crash_child.py STORE_URL SEED. Each event carries ``i`` = its own seq (this process is the
only writer), so the parent can check content as well as presence. A line ``<last seq> <batch size>``
is printed (and flushed) only after ``append`` returned, i.e. after the event was acknowledged.
"""

from __future__ import annotations

import random
import sys

from quotaplane.journal import open_journal


def main() -> None:
    url, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    j = open_journal(url)
    last = j.last_seq("crash")
    print(f"start {last}", flush=True)
    while True:
        n = rng.randint(1, 5)
        batch = [{"type": "crash.test", "i": last + k, "pad": "x" * rng.randint(0, 200)}
                 for k in range(1, n + 1)]
        last = j.append("crash", batch)
        sys.stdout.write(f"{last} {n}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
