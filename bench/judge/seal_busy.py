#!/usr/bin/env python3
"""How often the kernel refuses to seal a tensor arena (EBUSY), and whether the transport's
retry (shm_transport.seal_arena) gets the seal every time.

Fills memory files as the transport's sender does (memfd_create, ftruncate, pwrite), asks for
the seals once with a plain fcntl (a refusal counts as `busy`), and after a refusal seals with
`seal_arena`, which retries for up to SEAL_RETRY_S. With --compact-every S (root only) a thread asks
the kernel to compact memory every S seconds meanwhile (/proc/sys/vm/compact_memory): page
migration takes references to pages that make the seal fail.

    .venv/bin/python bench/judge/seal_busy.py --seconds 30 --mib 8 --compact-every 0.1

Prints one SUMMARY line: seals, busy (the kernel's refusals), recovered (sealed by the retry),
failed (the retry gave up) and the longest retry in seconds. Exit status 1 if any failed.
"""
from __future__ import annotations

import argparse
import errno
import fcntl
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "skills", "eval_worker"))

from caf_agent_eval import shm_transport  # noqa: E402

COMPACT = "/proc/sys/vm/compact_memory"


def compact_until(stop: threading.Event, every_s: float) -> None:
    while not stop.wait(every_s):
        with open(COMPACT, "w") as f:
            f.write("1")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=30.0, help="how long to seal for")
    p.add_argument("--mib", type=int, default=8, help="each memory file's size")
    p.add_argument("--compact-every", type=float, default=0.0,
                   help="seconds between compactions of memory (0: none; needs root)")
    a = p.parse_args()
    if a.seconds <= 0 or a.mib <= 0 or a.compact_every < 0:
        p.error("--seconds and --mib must be positive, --compact-every not negative")
    if a.compact_every and not os.access(COMPACT, os.W_OK):
        p.error(f"--compact-every needs to write {COMPACT} (root)")
    data = os.urandom(a.mib << 20)
    seals = shm_transport.SEALS | fcntl.F_SEAL_SEAL
    stop = threading.Event()
    compactor = None
    if a.compact_every:
        compactor = threading.Thread(target=compact_until, args=(stop, a.compact_every), daemon=True)
        compactor.start()
    n = busy = recovered = failed = 0
    longest = 0.0
    end = time.monotonic() + a.seconds
    try:
        while time.monotonic() < end:
            fd = os.memfd_create("seal_busy", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            try:
                os.ftruncate(fd, len(data))
                os.pwrite(fd, data, 0)
                n += 1
                try:
                    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
                    continue
                except OSError as e:
                    if e.errno != errno.EBUSY:
                        raise
                busy += 1
                t0 = time.monotonic()
                try:
                    shm_transport.seal_arena(fd)
                    recovered += 1
                except OSError as e:
                    failed += 1
                    print(f"retry gave up: {e}", flush=True)
                longest = max(longest, time.monotonic() - t0)
            finally:
                os.close(fd)
    finally:
        stop.set()
        if compactor is not None:
            compactor.join()
    print(f"SUMMARY seals={n} busy={busy} recovered={recovered} failed={failed} "
          f"longest_retry_s={longest:.3f} mib={a.mib} compact_every_s={a.compact_every}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
