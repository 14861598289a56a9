#!/usr/bin/env python3
"""Tensor transport between the eval worker and its child: seconds for one round trip of a
tensor (worker -> child with `load_sets`, child -> worker with `sets_after`), through a real
forked child, as a job's timing phase moves its input sets.

    .venv/bin/python bench/judge/bench_transport.py --rows 2048 --cols 4096 --repeats 5

2048x4096 fp32 is 32 MiB. Prints one line per round trip and a SUMMARY line (median).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "skills", "eval_worker"))

import torch  # noqa: E402

from caf_agent_eval import protocol  # noqa: E402
from caf_agent_eval.child_client import ChildProcess, Zygote  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2048)
    p.add_argument("--cols", type=int, default=4096)
    p.add_argument("--tensors", type=int, default=1, help="tensors per input set")
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    z = Zygote("cpu", 1)
    child = ChildProcess("cpu", 1, z)
    try:
        child.wait_ready(300)
        sets = [[torch.randn(a.rows, a.cols) for _ in range(a.tensors)]]
        mib = sum(t.numel() * t.element_size() for t in sets[0]) / 2**20
        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            child.request({"op": "load_sets", "sets": [protocol.encode_value(s) for s in sets]},
                          120, "load_sets")
            t1 = time.perf_counter()
            rep = child.request({"op": "sets_after"}, 120, "sets_after")
            back = [protocol.decode_value(s) for s in rep["sets"]]
            t2 = time.perf_counter()
            assert all(torch.equal(x, y) for x, y in zip(sets[0], back[0])), "round trip changed bytes"
            times.append(t2 - t0)
            print(f"{mib:.0f} MiB: to child {t1 - t0:.3f} s, back {t2 - t1:.3f} s, "
                  f"round trip {t2 - t0:.3f} s", flush=True)
        med = statistics.median(times)
        print(f"SUMMARY {mib:.0f} MiB round trip median {med:.3f} s (min {min(times):.3f}, "
              f"max {max(times):.3f}), {2 * mib / med:.0f} MiB/s", flush=True)
    finally:
        child.kill()
        z.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
