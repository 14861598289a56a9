"""Multi-process rollout on loopback: coordinator driving episodes, two rollout nodes,
three gpu-pool nodes with one CPU slot each, the replay policy doing real tool calls and
real evaluations. Every pool serves evaluations (counts per pool in the run summary).
Mid-run an eval worker and then its gpu-pool node are SIGKILLed; a new gpu-pool node
joins and serves too. Every planned episode must end in exactly one record."""
import os
import pathlib
import shutil
import signal
import struct
import tempfile
import time

import msgpack

from cafagent_testlib import REPO, free_port

EPISODES = 12


def read_records(store_dir):
    records = []
    for seg in sorted(pathlib.Path(store_dir).glob("segment-*.msgpack")):
        data = seg.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            assert data[pos:pos + 4] == b"CAFT", f"corrupt frame in {seg}"
            (length,) = struct.unpack("<I", data[pos + 4:pos + 8])
            records.append(msgpack.unpackb(data[pos + 12:pos + 12 + length], raw=False))
            pos += 12 + length
    return records


def node_id(node):
    line = [l for l in node.log().splitlines() if " joined " in l][0]
    return line.rsplit(" as ", 1)[1].strip()


def joined_at(node):
    """When `node` joined (time of day), or None if the run ended before it did."""
    lines = [l for l in node.log().splitlines() if " joined " in l]
    return lines[0].split()[0] if lines else None


def recorded_before(log, stamp):
    """Records the coordinator had logged before the time of day `stamp` (HH:MM:SS.mmm)."""
    done = 0
    for line in log.splitlines():
        parts = line.split()
        if parts and parts[0] < stamp and line.rstrip().endswith("]") and "/" in parts[-1]:
            done = int(parts[-1].strip("[]").split("/")[0])
    return done


def pool_counts(log):
    lines = log.splitlines()
    start = lines.index("evaluations per GPU pool:")
    counts = {}
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        name, n = line.strip().rsplit(": ", 1)
        counts[name] = int(n)
    return counts


def children_of(pid):
    out = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            out.append(int(entry.name))
    return out


def workspace_root(tmp_path):
    """Sandbox uids must reach the workspaces: pytest's tmp dirs are mode 0700."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="caf_agent_ws_", dir="/tmp"))
    root.chmod(0o755)
    (tmp_path / "ws-root").write_text(str(root))
    return root


def write_config(tmp_path, python):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name in ("softmax", "layernorm", "fused_elementwise"):
        shutil.copy(REPO / "skills" / "tasks" / f"{name}.py", tasks / f"{name}.py")
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f"""
[runtime]
run_dir = "{tmp_path / 'run'}"
[rollout]
max_concurrent_episodes = 2
tasks_dir = "{tasks}"
skills_dir = "{REPO / 'skills'}"
[gpu_pool]
slots = 1
worker_python = "{python}"
job_deadline_s = 240
[sandbox]
workspace_root = "{workspace_root(tmp_path)}"
[policy]
replay_path = "{REPO / 'skills' / 'replay' / 'default.jsonl'}"
""")
    return cfg


def test_every_started_episode_ends_in_one_record(nodes, tmp_path):
    python = os.environ.get("CAF_AGENT_PYTHON", str(REPO / ".venv" / "bin" / "python"))
    cfg = write_config(tmp_path, python)
    port = free_port()
    addr = f"127.0.0.1:{port}"
    coord = nodes("--role", "coordinator", "--config", str(cfg), "--port", str(port),
                  "--episodes", str(EPISODES), name="coordinator")
    coord.wait_for("listening on")
    pool = nodes("--role", "gpu-pool", "--config", str(cfg), "--coordinator", addr, name="pool1")
    others = [nodes("--role", "gpu-pool", "--config", str(cfg), "--coordinator", addr, name=f"pool{i}")
              for i in (2, 3)]
    for p in [pool, *others]:
        p.wait_for("joined", timeout=60)
    nodes("--role", "rollout", "--config", str(cfg), "--coordinator", addr, name="rollout1")
    nodes("--role", "rollout", "--config", str(cfg), "--coordinator", addr, name="rollout2")

    coord.wait_for("[2/", timeout=240)
    # The node's children are its eval workers and its reaper (sandbox/node_reaper).
    workers = [p for p in children_of(pool.proc.pid)
               if b"caf_agent_eval.worker" in pathlib.Path(f"/proc/{p}/cmdline").read_bytes()]
    assert workers, "the gpu-pool node has no eval worker processes"
    os.kill(workers[0], signal.SIGKILL)
    # The kill is noticed either by the job it was running (an infrastructure
    # failure, retried) or, if it was idle, before its slot's next job.
    deadline = time.monotonic() + 240
    while not ("retrying" in pool.log() or "while idle; restarted" in pool.log()):
        assert time.monotonic() < deadline, pool.log()
        assert pool.proc.poll() is None, pool.log()
        time.sleep(0.1)

    coord.wait_for("[4/", timeout=240)
    pool.proc.send_signal(signal.SIGKILL)
    pool.proc.wait()
    coord.wait_for("gpu-pool@", timeout=5)
    coord.wait_for(" down (", timeout=10)
    replacement = nodes("--role", "gpu-pool", "--config", str(cfg), "--coordinator", addr, name="pool4")
    # Once it has joined, the other pools go too: what is left of the run can only be judged by
    # the replacement (with them alive, task affinity could keep every evaluation on them).
    deadline = time.monotonic() + 60
    while joined_at(replacement) is None and coord.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if joined_at(replacement) is not None:
        for p in others:
            p.proc.send_signal(signal.SIGKILL)
            p.proc.wait()

    assert coord.proc.wait(timeout=400) == 0, coord.log()
    log = coord.log()
    assert "run finished" in log
    store = [line.split(" in ")[-1].strip() for line in log.splitlines() if "records in" in line][-1]
    records = read_records(store)
    ids = sorted(r["episode_id"] for r in records)
    assert ids == list(range(1, EPISODES + 1)), ids
    terminations = {}
    for r in records:
        terminations[r["termination"]] = terminations.get(r["termination"], 0) + 1
        assert r["format_version"] == 1
        if r["termination"] == "aborted":
            assert r["abort_reason"], r
        else:
            assert r["reward"] in (-1, 1, 2, 3)
            assert r["turns"] >= 1
    assert sum(terminations.values()) == EPISODES
    shutil.rmtree((tmp_path / "ws-root").read_text(), ignore_errors=True)
    assert terminations.get("finished", 0) >= 1
    # The killed worker was noticed and restarted; a job it was running was retried, not scored.
    noticed = pool.log()
    assert ("infrastructure failure" in noticed and "retrying" in noticed) or \
        "killed by signal 9 (Killed) while idle; restarted" in noticed, noticed
    # One logical pool: every pool served evaluations (the killed one may have none: its
    # worker was killed under its job, then its node), and so did the replacement, the only
    # pool left, when episodes were still to come after it joined.
    counts = pool_counts(log)
    for node in (node_id(p) for p in others):
        assert counts.get(node, 0) > 0, (node, counts)
    joined = joined_at(replacement)
    if joined and recorded_before(log, joined) <= EPISODES - 3:
        assert counts.get(node_id(replacement), 0) > 0, (node_id(replacement), counts)
    print("terminations:", terminations, "evaluations per pool:", counts)
