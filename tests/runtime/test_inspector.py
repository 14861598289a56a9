"""The inspector's views of a real local cluster on loopback: a coordinator driving
sim-policy episodes, a rollout node and a gpu-pool node with two sim slots. The test
checks the JSON against what it did: the episodes started (the run's count, the
episodes in flight on the rollout node and their transcripts), the slots busy, a
killed gpu-pool node (down, its pool gone), a stuck episode (the sim policy's
generations outlast a 1 s no-progress threshold), the Prometheus endpoint and the
metrics JSONL of the run directory."""
import json
import pathlib
import signal
import subprocess
import time
import urllib.request

from cafagent_testlib import free_port

MAX_EPISODES = 6
SLOTS = 2


def write_config(path, port, prom_port, run_dir, latency_ms):
    path.write_text(f"""
[cluster]
port = {port}
coordinator = "127.0.0.1:{port}"
[runtime]
run_dir = "{run_dir}"
[rollout]
max_concurrent_episodes = {MAX_EPISODES}
mode = "train"
[gpu_pool]
slots = {SLOTS}
backend = "sim"
[policy]
backend = "sim"
sim_latency_ms_mean = {latency_ms}
sim_eval_ms_mean = 400.0
[observe]
prometheus_port = {prom_port}
metrics_interval_ms = 200
stuck_no_progress_s = 1
""")


def view(caf_agent, config, *what):
    out = subprocess.run([str(caf_agent), "--role", "inspector", "--config", str(config), *what, "--json"],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def until(fn, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"{what} not reached within {timeout}s (last: {last})")


def test_inspector_json_matches_the_cluster(caf_agent, nodes, tmp_path):
    port, prom = free_port(), free_port()
    config = tmp_path / "sim.toml"
    # Rationale: 1.5 s generations against a 1 s threshold make every generating
    # episode a stuck one within seconds, the sim policy's way of hanging.
    write_config(config, port, prom, tmp_path / "run", 1500.0)
    coord = nodes("--role", "coordinator", "--config", str(config), "--episodes", "200", name="coordinator")
    coord.wait_for("listening on")
    rollout = nodes("--role", "rollout", "--config", str(config), name="rollout")
    pool = nodes("--role", "gpu-pool", "--config", str(config), name="gpu-pool")
    rollout.wait_for("joined")
    pool.wait_for("joined")

    # Episodes started: the rollout node runs its limit, and the run counts them.
    eps = until(lambda: (lambda v: v if v["summary"]["in_flight"] == MAX_EPISODES else None)(
        view(caf_agent, config, "episodes")), what="episodes in flight")
    rollout_id = [n["node_id"] for n in view(caf_agent, config, "nodes") if n["role"] == "rollout"][0]
    assert {e["node_id"] for e in eps["episodes"]} == {rollout_id}
    assert eps["run"]["active"] and eps["run"]["planned"] == 200
    assert eps["run"]["started"] >= MAX_EPISODES
    assert eps["run"]["started"] - eps["run"]["recorded"] == MAX_EPISODES

    # The transcript of one of them, from its rollout node.
    first = eps["episodes"][0]
    transcript = view(caf_agent, config, "episode", str(first["episode_id"]))
    assert transcript["episode_id"] == first["episode_id"]
    assert transcript["task_id"] == first["task_id"]
    assert transcript["turns"] >= first["turn"]
    assert len(transcript["assistant"]) == transcript["turns"]

    # Actors by kind: the episode actors of the rollout node are the episodes in flight.
    actors = view(caf_agent, config, "actors")
    kinds = {k["kind"]: k for k in actors["kinds"]}
    assert kinds["episode"]["caf.system.running-actors"] == MAX_EPISODES
    assert kinds["gpu_slot"]["caf.system.running-actors"] == SLOTS
    assert kinds["episode"]["handled"]["completion"] > 0
    assert kinds["coordinator"]["handled"]["node_heartbeat"] > 0

    # Slots busy: the pool reports its two slots, and evaluations keep them busy.
    gpu = until(lambda: (lambda v: v if v["pools"] and v["pools"][0]["busy"] > 0 else None)(
        view(caf_agent, config, "gpu")), timeout=40, what="a busy slot")
    assert gpu["pools"][0]["slots"] == SLOTS and gpu["pools"][0]["quarantined"] == 0
    assert gpu["pools"][0]["busy"] <= SLOTS

    # A stuck episode: flagged in the view, counted, logged by the coordinator.
    stuck = until(lambda: (lambda v: v if v["stuck"] else None)(view(caf_agent, config, "episodes")),
                  what="a stuck episode")
    flag = stuck["stuck"][0]
    assert flag["reason"] == "no_progress"
    assert flag["episode_id"] in {e["episode_id"] for e in stuck["episodes"]}
    assert stuck["summary"]["stuck_total"]["no_progress"] >= 1
    coord.wait_for(f"episode {flag['episode_id']} on {rollout_id} looks stuck (no_progress)")

    # Prometheus: the same facts as text.
    text = urllib.request.urlopen(f"http://127.0.0.1:{prom}/metrics", timeout=5).read().decode()
    assert 'caf_system_running_actors{process="' in text and 'name="episode"} ' in text
    assert 'caf_agent_gpu_slots{' in text and 'caf_agent_episodes_stuck_total{reason="no_progress"}' in text

    # A killed node: down in the view, its pool no longer counted.
    pool.proc.send_signal(signal.SIGKILL)
    pool.proc.wait()
    nodes_view = until(lambda: (lambda v: v if any(n["role"] == "gpu-pool" and n["state"] == "down" for n in v)
                                else None)(view(caf_agent, config, "nodes")), timeout=10, what="the pool node down")
    assert [n for n in nodes_view if n["role"] == "gpu-pool"][0]["reason"].startswith("connection lost")
    assert view(caf_agent, config, "gpu")["pools"] == []

    assert coord.stop(signal.SIGTERM) == 130
    rollout.kill()
    store = next((tmp_path / "run").glob("trajectories-*"))
    lines = [json.loads(l) for l in (store / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) >= 3
    assert any(p["busy"] > 0 for l in lines for p in l["gpu"]["pools"])
    assert lines[-1]["run"]["started"] >= eps["run"]["started"]


def test_inspector_errors_are_clear(caf_agent, nodes, tmp_path):
    port = free_port()
    config = tmp_path / "sim.toml"
    write_config(config, port, -1, tmp_path / "run", 100.0)
    coord = nodes("--role", "coordinator", "--config", str(config), name="coordinator")
    coord.wait_for("listening on")
    run = lambda *a: subprocess.run([str(caf_agent), "--role", "inspector", "--config", str(config), *a],
                                    capture_output=True, text=True, timeout=20)
    bad = run("bogus")
    assert bad.returncode == 2 and "unknown view 'bogus'" in bad.stderr
    missing = run("episode")
    assert missing.returncode == 2 and "needs an episode id" in missing.stderr
    absent = run("episode", "77", "--json")
    assert absent.returncode == 1 and "not in flight" in json.loads(absent.stdout)["error"]
    assert json.loads(run("train", "--json").stdout)["message"] == "no trainer"
    assert "no run is driven" in run("episodes").stdout
    assert coord.stop(signal.SIGTERM) == 0
