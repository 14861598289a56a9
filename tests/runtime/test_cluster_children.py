"""Children die with their node: a real gpu-pool node (the slot's eval worker, its fork server
in a new session and the server's spare child) and a real rollout node (a Bash tool call with
a background process in its bubblewrap sandbox) are SIGKILLed; within 2 s no process of either
survives. (tests/sandbox/node_reaper_test.cpp covers a grandchild that escapes the group and
the parent-death signal.)"""
import json
import os
import pathlib
import shutil
import tempfile
import signal
import time

from cafagent_testlib import REPO, free_port


def children_of():
    """ppid -> [pid] over every live process."""
    kids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] != "Z":
            kids.setdefault(int(fields[1]), []).append(int(entry))
    return kids


def descendants(pid):
    """(pid, start time) of every live descendant of `pid`."""
    kids, out, todo = children_of(), [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append((child, start_time(child)))
            todo.append(child)
    return out


def start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()[19]


def alive(pid, started):
    """The same process (pid and start time) still runs and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[0] != "Z" and fields[19] == started


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"


def wait_for_descendants(node, want, timeout=60):
    """Descendants of `node` once every substring of `want` is in some command line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs = descendants(node.proc.pid)
        lines = [cmdline(p) for p, _ in procs]
        if all(any(w in l for l in lines) for w in want):
            return procs
        assert node.proc.poll() is None, node.log()
        time.sleep(0.2)
    raise AssertionError(f"{want} never all ran under the node: {lines}\n{node.log()[-3000:]}")


def assert_all_gone_after_kill(node, procs):
    node.proc.send_signal(signal.SIGKILL)
    node.proc.wait()
    # Rationale: the bound for a node's children after its SIGKILL.
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        left = [(p, s) for p, s in procs if alive(p, s)]
        if not left:
            return
        time.sleep(0.05)
    for p, _ in left:
        os.kill(p, signal.SIGKILL)
    raise AssertionError("outlived their SIGKILLed node: " + "; ".join(f"{p} {cmdline(p)}" for p, _ in left))


def test_children_of_a_sigkilled_gpu_pool_and_rollout_node_are_gone_within_2s(nodes, tmp_path):
    # Not the workspace_root fixture: a SIGKILLed rollout node cannot remove its workspace.
    workspace_root = pathlib.Path(tempfile.mkdtemp(prefix="caf_agent_ws_", dir="/tmp"))
    workspace_root.chmod(0o755)
    try:
        run_and_kill(nodes, tmp_path, workspace_root)
    finally:
        shutil.rmtree(workspace_root, ignore_errors=True)


def run_and_kill(nodes, tmp_path, workspace_root):
    python = os.environ.get("CAF_AGENT_PYTHON", str(REPO / ".venv" / "bin" / "python"))
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "add_relu.py").write_text((REPO / "skills" / "tasks" / "add_relu.py").read_text())
    # A pure-PyTorch model_new.py and verify (the slot's worker starts), then a shell that
    # keeps running in the sandbox.
    model_new = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n" \
                "    def forward(self, a, b):\n        return torch.relu(a + b)\n"
    calls = [{"name": "Write", "arguments": {"file_path": "model_new.py", "content": model_new}},
             {"name": "Bash", "arguments": {"command": "verify"}},
             {"name": "Bash", "arguments": {"command": "sleep 120 & sleep 120; echo done"}}]
    turns = [f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls] + ["Done."]
    replay = tmp_path / "replay.jsonl"
    replay.write_text(json.dumps({"task_id": "add_relu", "turns": turns}) + "\n")
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f"""
[cluster]
heartbeat_interval_ms = 200
node_timeout_ms = 1000
[runtime]
run_dir = "{tmp_path / 'run'}"
[rollout]
tasks_dir = "{tasks}"
skills_dir = "{REPO / 'skills'}"
[sandbox]
workspace_root = "{workspace_root}"
bash_timeout_s = 300
[gpu_pool]
backend = "worker"
device = "cpu"
slots = 1
build_workers = 1
worker_python = "{python}"
[policy]
backend = "replay"
replay_path = "{replay}"
""")
    port = free_port()
    addr = f"127.0.0.1:{port}"
    coord = nodes("--role", "coordinator", "--config", str(cfg), "--port", str(port), "--episodes", "1",
                  name="coordinator")
    coord.wait_for("listening on")
    pool = nodes("--role", "gpu-pool", "--config", str(cfg), "--coordinator", addr, name="pool")
    rollout = nodes("--role", "rollout", "--config", str(cfg), "--coordinator", addr, name="rollout")
    # The agent's shell and its background sleep, inside bwrap's pid namespace (after verify).
    rollout_procs = wait_for_descendants(rollout, ["bwrap", "sleep 120"], timeout=240)
    # The slot's worker with its fork server (a new session) and the fork server's spare child.
    pool_procs = wait_for_descendants(pool, ["caf_agent_eval.worker", "caf_agent_eval.zygote"])
    assert len(pool_procs) >= 3, [cmdline(p) for p, _ in pool_procs]
    assert_all_gone_after_kill(pool, pool_procs)
    assert_all_gone_after_kill(rollout, rollout_procs)
