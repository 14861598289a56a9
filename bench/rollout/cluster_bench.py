#!/usr/bin/env python3
"""bench/rollout/cluster_bench.py: the cluster at 128 slots in real processes on loopback.

One coordinator (run driver + store), R rollout nodes (sim policy, sim tools) and P gpu-pool
nodes of S sim slots each, every one its own `caf-agent` process. Reports what the issue asks:
every pool used (evaluations per pool), no over-dispatch (the most episodes any rollout node
held at once, from the records' start and end times, against its limit), throughput, per-turn
orchestration overhead p50/p99 (the episodes' own `turn_overhead_us`), episode latency, slot
utilization, and the peak memory of each process.

  bench/rollout/cluster_bench.py --episodes 10000 --turns 150 --pools 16 --slots 8 --rollouts 4

Slot utilization is the slots' busy time over their time: busy = evaluations x the sim slot's
mean duration (the sim draws each from a lognormal with exactly that mean; over 10^5 jobs the
sample mean is within 0.1%), time = slots x the span from the first record's start to the last
one's end (ramp-up and drain included, so a lower bound of the utilization while work waits).
"""
import argparse
import json
import pathlib
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import msgpack

REPO = pathlib.Path(__file__).resolve().parents[2]


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_store(store):
    out = []
    for seg in sorted(pathlib.Path(store).glob("segment-[0-9][0-9][0-9][0-9][0-9][0-9].msgpack")):
        data, pos = seg.read_bytes(), 0
        while pos + 12 <= len(data) and data[pos:pos + 4] == b"CAFT":
            (n,) = struct.unpack("<I", data[pos + 4:pos + 8])
            out.append(msgpack.unpackb(data[pos + 12:pos + 12 + n], raw=False))
            pos += 12 + n
    return out


def status_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def percentile(sorted_values, q):
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def max_concurrency(intervals):
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=10000)
    ap.add_argument("--turns", type=int, default=150)
    ap.add_argument("--pools", type=int, default=16)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--rollouts", type=int, default=4)
    ap.add_argument("--policy-ms", type=float, default=20.0)
    ap.add_argument("--eval-ms", type=float, default=300.0)
    ap.add_argument("--max-concurrent", type=int, default=0, help="per rollout node; 0: episodes / rollouts")
    ap.add_argument("--binary", default=str(REPO / "build" / "caf-agent"))
    ap.add_argument("--out", default="", help="write the numbers as JSON here")
    ap.add_argument("--scheduler-idle", default="spin", choices=["spin", "sleep"],
                    help="[runtime] scheduler_idle of every member")
    a = ap.parse_args()
    limit = a.max_concurrent or -(-a.episodes // a.rollouts)
    work = pathlib.Path(tempfile.mkdtemp(prefix="caf_cluster_bench_"))
    cfg = work / "bench.toml"
    cfg.write_text(f"""
[cluster]
heartbeat_interval_ms = 1000
node_timeout_ms = 10000
[runtime]
scheduler_idle = "{a.scheduler_idle}"
run_dir = "{work / 'run'}"
log_level = "info"
[rollout]
max_concurrent_episodes = {limit}
max_turns_train = {a.turns}
tasks_dir = "{REPO / 'skills' / 'tasks'}"
skills_dir = "{REPO / 'skills'}"
[gpu_pool]
backend = "sim"
slots = {a.slots}
queue_capacity = 4096
[policy]
backend = "sim"
sim_latency_ms_mean = {a.policy_ms}
sim_eval_ms_mean = {a.eval_ms}
""")
    port = free_port()
    addr = f"127.0.0.1:{port}"
    procs = {}

    def start(name, *args):
        log = open(work / f"{name}.log", "wb")
        procs[name] = subprocess.Popen([a.binary, *args, "--config", str(cfg)], stdout=log, stderr=subprocess.STDOUT,
                                       cwd=REPO)

    start("coordinator", "--role", "coordinator", "--port", str(port), "--episodes", str(a.episodes))
    deadline = time.monotonic() + 10
    while "listening on" not in (work / "coordinator.log").read_text(errors="replace"):
        assert time.monotonic() < deadline and procs["coordinator"].poll() is None, "coordinator did not start"
        time.sleep(0.1)
    for i in range(a.pools):
        start(f"pool{i + 1}", "--role", "gpu-pool", "--coordinator", addr)
    for i in range(a.rollouts):
        start(f"rollout{i + 1}", "--role", "rollout", "--coordinator", addr)
    t0 = time.monotonic()
    peak = {name: 0 for name in procs}
    cpu0 = {name: None for name in procs}
    while procs["coordinator"].poll() is None:
        for name, p in procs.items():
            hwm = status_kb(p.pid, "VmHWM")
            if hwm:
                peak[name] = max(peak[name], hwm)
        time.sleep(1.0)
    wall = time.monotonic() - t0
    code = procs["coordinator"].returncode
    for name, p in procs.items():
        if p.poll() is None:
            p.terminate()
    for p in procs.values():
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
    log = (work / "coordinator.log").read_text(errors="replace")
    m = re.search(r"\(plan in (.+)/plan\.json\)", log)
    store = m.group(1)
    records = read_store(store)
    ids = sorted(r["episode_id"] for r in records)
    pools, inside = {}, False
    for line in log.splitlines():
        if line.startswith("evaluations per GPU pool:"):
            inside = True
        elif inside and line.startswith("  ") and ": " in line:
            node, n = line.strip().rsplit(": ", 1)
            pools[node] = int(n)
        elif inside:
            inside = False
    by_node = {}
    for r in records:
        by_node.setdefault(r["node_id"], []).append((r["started_at_ms"], r["ended_at_ms"]))
    overhead = sorted(u / 1000.0 for r in records for u in r.get("turn_overhead_us", []))
    latency = sorted((r["ended_at_ms"] - r["started_at_ms"]) / 1000.0 for r in records)
    span_s = (max(r["ended_at_ms"] for r in records) - min(r["started_at_ms"] for r in records)) / 1000.0
    evals = sum(pools.values())
    slots = a.pools * a.slots
    out = {
        "command": " ".join(sys.argv),
        "exit_code": code,
        "episodes": a.episodes,
        "records": len(records),
        "one_record_each": ids == list(range(1, a.episodes + 1)),
        "terminations": {t: sum(1 for r in records if r["termination"] == t) for t in {r["termination"] for r in records}},
        "turns": sum(r["turns"] for r in records),
        "wall_s": round(wall, 1),
        "span_s": round(span_s, 1),
        "turns_per_s": round(sum(r["turns"] for r in records) / span_s, 1),
        "episodes_per_s": round(len(records) / span_s, 2),
        "evaluations": evals,
        "pools_used": sum(1 for n in pools.values() if n > 0),
        "pools": a.pools,
        "evaluations_per_pool": pools,
        "per_pool_min_max": [min(pools.values()) if pools else 0, max(pools.values()) if pools else 0],
        "slot_utilization_over_span": round(evals * a.eval_ms / 1000.0 / (slots * span_s), 4),
        "limit_per_rollout_node": limit,
        "max_concurrent_per_rollout_node": {n: max_concurrency(iv) for n, iv in by_node.items()},
        "turn_overhead_ms": {"p50": percentile(overhead, 0.5), "p90": percentile(overhead, 0.9),
                             "p99": percentile(overhead, 0.99), "max": overhead[-1] if overhead else 0},
        "episode_latency_s": {"p50": percentile(latency, 0.5), "p99": percentile(latency, 0.99)},
        "peak_rss_mb": {n: round(kb / 1024, 1) for n, kb in peak.items()},
        "work_dir": str(work),
    }
    text = json.dumps(out, indent=2)
    print(text)
    if a.out:
        pathlib.Path(a.out).write_text(text + "\n")
    ok = (out["one_record_each"] and out["pools_used"] == a.pools and code == 0 and
          all(v <= limit for v in out["max_concurrent_per_rollout_node"].values()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
