"""Child process of the fail-over tests: a leader that holds the lease of stream "p" and appends.

Usage: python _leader_child.py STORE_URL HOLDER TTL. Prints "leader" once it holds the lease, then the seq
of every acknowledged append (each event is {"by": HOLDER}); renews the lease every TTL/3. Exits 2 when an
append is fenced (NotLeaderError) and 3 when a renewal finds the lease taken.
"""

from __future__ import annotations

import sys
import time

from quotaplane.errors import NotLeaderError
from quotaplane.journal import open_journal


def main() -> None:
    url, holder, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])
    j = open_journal(url)
    while not j.acquire_lease("p", holder, ttl):
        time.sleep(0.05)
    print("leader", flush=True)
    renewed = time.monotonic()
    while True:
        if time.monotonic() - renewed > ttl / 3:
            if not j.acquire_lease("p", holder, ttl):
                print("lost", flush=True)
                sys.exit(3)
            renewed = time.monotonic()
        try:
            seq = j.append("p", [{"by": holder}], holder=holder)
        except NotLeaderError:
            print("fenced", flush=True)
            sys.exit(2)
        print(seq, flush=True)
        time.sleep(0.002)


if __name__ == "__main__":
    main()
