"""Multi-process cluster on loopback under faults, with sim backends (fast, no sandbox):
several GPU pools used as one (a killed pool's replacement serves too), a frozen rollout
node that rejoins, a coordinator SIGKILLed and resumed on its port, a storage fault that
fails the run loudly. Every planned episode ends in exactly one record."""
import pathlib
import re
import resource
import shutil
import signal
import struct
import subprocess
import time

import msgpack

from cafagent_testlib import REPO, free_port


def write_config(tmp_path, **rollout):
    tasks = tmp_path / "tasks"
    tasks.mkdir(exist_ok=True)
    for name in ("softmax", "layernorm", "fused_elementwise"):
        shutil.copy(REPO / "skills" / "tasks" / f"{name}.py", tasks / f"{name}.py")
    extra = "".join(f"{k} = {v}\n" for k, v in rollout.items())
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f"""
[cluster]
heartbeat_interval_ms = 200
node_timeout_ms = 1000
rejoin_timeout_ms = 30000
[runtime]
run_dir = "{tmp_path / 'run'}"
[rollout]
max_concurrent_episodes = 4
max_turns_eval = 12
tasks_dir = "{tasks}"
skills_dir = "{REPO / 'skills'}"
{extra}
[gpu_pool]
backend = "sim"
slots = 1
[policy]
backend = "sim"
sim_latency_ms_mean = 15.0
sim_eval_ms_mean = 40.0
""")
    return cfg


def read_store(store):
    """Intact records of a store (a torn tail of a killed writer is skipped)."""
    out = []
    for seg in sorted(pathlib.Path(store).glob("segment-[0-9][0-9][0-9][0-9][0-9][0-9].msgpack")):
        data, pos = seg.read_bytes(), 0
        while pos + 12 <= len(data) and data[pos:pos + 4] == b"CAFT":
            (n,) = struct.unpack("<I", data[pos + 4:pos + 8])
            if pos + 12 + n > len(data):
                break
            out.append(msgpack.unpackb(data[pos + 12:pos + 12 + n], raw=False))
            pos += 12 + n
    return out


def plan_dir(log):
    m = re.search(r"\(plan in (.+)/plan\.json\)", log)
    assert m, log
    return m.group(1)


def assert_one_record_each(store, episodes):
    records = read_store(store)
    ids = sorted(r["episode_id"] for r in records)
    assert ids == list(range(1, episodes + 1)), ids
    return records


def pool_counts(output):
    counts, inside = {}, False
    for line in output.splitlines():
        if line.startswith("evaluations per GPU pool:"):
            inside = True
        elif inside and line.startswith("  ") and ": " in line:
            node, n = line.strip().rsplit(": ", 1)
            counts[node] = int(n)
        elif inside:
            inside = False
    return counts


def start_cluster(nodes, cfg, port, episodes, rollouts=2, pools=1, coord_args=()):
    addr = f"127.0.0.1:{port}"
    coord = nodes("--role", "coordinator", "--config", str(cfg), "--port", str(port),
                  "--episodes", str(episodes), *coord_args, name="coordinator")
    coord.wait_for("listening on")
    members = {}
    for i in range(pools):
        members[f"pool{i + 1}"] = nodes("--role", "gpu-pool", "--config", str(cfg), "--coordinator", addr,
                                        name=f"pool{i + 1}")
    for i in range(rollouts):
        members[f"rollout{i + 1}"] = nodes("--role", "rollout", "--config", str(cfg), "--coordinator", addr,
                                           name=f"rollout{i + 1}")
    return coord, members


def node_id_of(node):
    m = re.search(r"joined \S+ as (\S+)", node.log())
    assert m, node.log()
    return m.group(1)


def test_every_pool_serves_and_a_restarted_pool_serves_again(nodes, tmp_path):
    cfg = write_config(tmp_path)
    port = free_port()
    coord, m = start_cluster(nodes, cfg, port, 120, rollouts=2, pools=3)
    for p in ("pool1", "pool2", "pool3"):
        m[p].wait_for("joined")
    coord.wait_for("[30/", timeout=60)
    killed = node_id_of(m["pool1"])
    m["pool1"].proc.send_signal(signal.SIGKILL)
    m["pool1"].proc.wait()
    pool4 = nodes("--role", "gpu-pool", "--config", str(cfg), "--coordinator", f"127.0.0.1:{port}", name="pool4")
    pool4.wait_for("joined")
    assert coord.proc.wait(timeout=120) == 0, coord.log()
    counts = pool_counts(coord.log())
    ids = {p: node_id_of(m[p]) for p in ("pool2", "pool3")}
    ids["pool1"] = killed
    ids["pool4"] = node_id_of(pool4)
    for name, node in ids.items():
        assert counts.get(node, 0) > 0, f"{name} ({node}) served no evaluation: {counts}\n{coord.log()[-3000:]}"
    assert_one_record_each(plan_dir(coord.log()), 120)


def test_frozen_rollout_node_rejoins_and_its_episodes_run_elsewhere(nodes, tmp_path):
    cfg = write_config(tmp_path, retry_aborted="true")
    port = free_port()
    coord, m = start_cluster(nodes, cfg, port, 160, rollouts=2, pools=2)
    coord.wait_for("[10/", timeout=60)
    frozen = m["rollout1"]
    first_id = node_id_of(frozen)
    frozen.proc.send_signal(signal.SIGSTOP)
    try:
        coord.wait_for(f"node {first_id} down", timeout=15)
        coord.wait_for("go back to the queue", timeout=5)
    finally:
        frozen.proc.send_signal(signal.SIGCONT)
    frozen.wait_for("rejoining", timeout=15)
    frozen.wait_for(f"as {first_id}#1", timeout=15)
    assert coord.proc.wait(timeout=120) == 0, coord.log()
    records = assert_one_record_each(plan_dir(coord.log()), 160)
    # Started episodes of the lost node ran again (retry_aborted): nothing was aborted.
    assert not [r for r in records if r["termination"] == "aborted"], coord.log()[-3000:]
    assert any(r["node_id"] == first_id + "#1" for r in records), "the rejoined node got no work"


def test_killed_coordinator_resumes_on_its_port(nodes, tmp_path):
    cfg = write_config(tmp_path)
    port = free_port()
    coord, m = start_cluster(nodes, cfg, port, 100, rollouts=2, pools=2)
    coord.wait_for("[15/", timeout=60)
    store = plan_dir(coord.log())
    coord.proc.send_signal(signal.SIGKILL)
    coord.proc.wait()
    before = len(read_store(store))
    assert 15 <= before < 100
    restarted = time.monotonic()
    again = nodes("--role", "coordinator", "--config", str(cfg), "--port", str(port), "--resume", store,
                  name="coordinator2")
    # Without SO_REUSEADDR the port stays in TIME_WAIT for 60 s; 10 s leaves a loaded machine
    # room to start the process.
    again.wait_for("listening on", timeout=10)
    assert time.monotonic() - restarted < 10, "the restarted coordinator did not bind its port at once"
    assert again.proc.wait(timeout=120) == 0, again.log()
    assert "resuming" in again.log()
    m["rollout1"].wait_for("rejoining")
    assert_one_record_each(store, 100)


def test_storage_fault_stops_the_run_loudly(nodes, tmp_path):
    cfg = write_config(tmp_path)
    port = free_port()

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (60000, 60000))

    # The coordinator's output goes to a pipe: the file size limit is for its store.
    coord = subprocess.Popen([str(REPO / "build" / "caf-agent"), "--role", "coordinator", "--config", str(cfg),
                              "--port", str(port), "--episodes", "200"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, cwd=REPO, preexec_fn=small_files)
    try:
        addr = f"127.0.0.1:{port}"
        time.sleep(0.5)
        nodes("--role", "gpu-pool", "--config", str(cfg), "--coordinator", addr, name="pool")
        nodes("--role", "rollout", "--config", str(cfg), "--coordinator", addr, name="rollout")
        try:
            out, _ = coord.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            coord.kill()
            out = coord.communicate()[0]
    finally:
        if coord.poll() is None:
            coord.kill()
    log = out.decode(errors="replace")
    members = "".join(f"\n--- {n}.log\n" + (tmp_path / f"{n}.log").read_text(errors="replace")
                      for n in ("pool", "rollout") if (tmp_path / f"{n}.log").exists())
    assert coord.returncode == 4, log + members
    m = re.search(r"storage failed: .*too large.*kept (\d+) records", log)
    assert m, log
    kept = int(m.group(1))
    assert 0 < kept < 200
    store = plan_dir(log)
    records = read_store(store)
    assert len(records) == kept
    assert len({r["episode_id"] for r in records}) == kept
    # No torn frame and no empty segment was left behind: the frames fill every segment.
    for seg in pathlib.Path(store).glob("segment-*.msgpack"):
        data, pos = seg.read_bytes(), 0
        assert data, f"empty segment {seg}"
        while pos + 12 <= len(data) and data[pos:pos + 4] == b"CAFT":
            pos += 12 + struct.unpack("<I", data[pos + 4:pos + 8])[0]
        assert pos == len(data), f"{seg}: a torn frame at offset {pos}"
