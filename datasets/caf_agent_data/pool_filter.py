"""The judge's verdict on tasks through the GPU pool: the tasks are evaluated by the real
runtime (`caf-agent --role local --eval`), so each one is loaded and validated by an eval
worker on a GPU-pool slot exactly as an episode's evaluation would be (CPU slots here, GPUs
on a GPU host; the cluster equivalent runs the written config with `--role coordinator` and
gpu-pool nodes joining it).

The policy is a recording that changes nothing (the replay backend's wildcard episode), so
each episode's final evaluation judges the workspace's starting files against the task: a
task the judge cannot judge is answered `task error: <why>` (load failure, too large for the
slot, a reference that raises) and the episode is recorded aborted with that reason (the
judge scores a degenerate reference, so the in-process filter, filter.py, is what rejects
those); a task
it judges ends with the starting files' verdict (they are no kernel: reward -1), which is
the acceptance. What the judge answered is read back from the trajectory store.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_BINARY = os.path.join(_ROOT, "build", "caf-agent")
#: The recorded turn: text without a tool call ends the episode at once.
NO_CHANGE_TURN = "No changes: the starting files are the submission."
_TASK_ERROR = "task error: "


class PoolError(Exception):
    """The runtime could not be run or its records not read (not any task's fault)."""


def _toml(value) -> str:
    return json.dumps(value)  # a JSON string or number is a TOML one


def write_run(workdir: str, tasks: list, slots: int, device: str, worker_python: str,
              workspace_root: str) -> str:
    """Writes tasks/<name>.py, the replay file and the config; returns the config's path."""
    tdir = os.path.join(workdir, "tasks")
    os.makedirs(tdir, exist_ok=True)
    for name, source in tasks:
        with open(os.path.join(tdir, f"{name}.py"), "w", encoding="utf-8") as f:
            f.write(source)
    replay = os.path.join(workdir, "replay.jsonl")
    with open(replay, "w", encoding="utf-8") as f:
        f.write(json.dumps({"task_id": "*", "turns": [NO_CHANGE_TURN]}) + "\n")
    cfg = os.path.join(workdir, "pool.toml")
    with open(cfg, "w", encoding="utf-8") as f:
        f.write(f"""# Written by caf_agent_data.pool_filter: the judge's verdict on {len(tasks)} tasks.
[cluster]
port = 0
[runtime]
run_dir = {_toml(os.path.join(workdir, "run"))}
[rollout]
tasks_dir = {_toml(tdir)}
max_concurrent_episodes = {2 * slots}
[gpu_pool]
slots = {slots}
device = {_toml(device)}
worker_python = {_toml(worker_python)}
[sandbox]
workspace_root = {_toml(workspace_root)}
[policy]
backend = "replay"
replay_path = {_toml(replay)}
""")
    return cfg


def judge_through_pool(tasks: list, binary: str = DEFAULT_BINARY, slots: int = 2, device: str = "cpu",
                       worker_python: str = "", timeout_s: float = 3600.0, workdir: str = "") -> dict:
    """tasks: (name, source) pairs (names as file stems, not starting with `_`). Returns
    {"verdicts": {name: {"accepted", "reason"}}, "wall_s", "records"}. Raises PoolError when
    the runtime fails as a whole."""
    for name, _ in tasks:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
            raise ValueError(f"task name {name!r} is not a plain file stem")
    if not os.path.exists(binary):
        raise PoolError(f"{binary} is not built (cmake --build build --target caf-agent)")
    own_dir = not workdir
    workdir = workdir or tempfile.mkdtemp(prefix="caf_pool_filter_")
    # Rationale: the sandbox's uids must reach the workspaces (a private temp dir is 0700).
    ws = tempfile.mkdtemp(prefix="caf_pool_ws_")
    os.chmod(ws, 0o755)
    python = worker_python or os.path.join(_ROOT, ".venv", "bin", "python")
    cfg = write_run(workdir, tasks, slots, device, python, ws)
    t0 = time.time()
    try:
        run = subprocess.run([binary, "--role", "local", "--eval", "--config", cfg], cwd=_ROOT,
                             capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise PoolError(f"the pool run did not finish within {timeout_s:g} s") from None
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    wall = time.time() - t0
    if run.returncode != 0:
        raise PoolError(f"caf-agent --role local exited {run.returncode}: {run.stderr[-1500:]}")
    m = re.search(r"records in (\S+)", run.stdout)
    if not m:
        raise PoolError(f"caf-agent printed no store: {run.stdout[-500:]}")
    tool = os.path.join(os.path.dirname(binary), "rollout", "trajectory_tool")
    export = os.path.join(workdir, "records.jsonl")
    ex = subprocess.run([tool, "export", "--store", m.group(1), "--out", export], capture_output=True, text=True,
                        timeout=300)
    if ex.returncode != 0:
        raise PoolError(f"trajectory_tool export failed: {ex.stderr[-500:]}")
    verdicts = {}
    with open(export, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            verdicts[r["task_id"]] = _verdict(r)
    for name, _ in tasks:
        verdicts.setdefault(name, {"accepted": False, "stage": "pool", "reason": "no record of its episode"})
    if own_dir:
        shutil.rmtree(workdir, ignore_errors=True)
    return {"verdicts": verdicts, "wall_s": round(wall, 1), "records": len(verdicts)}


def _verdict(rec: dict) -> dict:
    if rec.get("termination") == "aborted":
        why = rec.get("abort_reason", "")
        i = why.find(_TASK_ERROR)
        if i >= 0:
            return {"accepted": False, "stage": "judge", "reason": "the judge refused the task: " + why[i + len(_TASK_ERROR):]}
        return {"accepted": False, "stage": "pool", "reason": f"the episode was aborted (not the task's fault?): {why}"}
    return {"accepted": True, "stage": "", "reason": "", "eval_ms": rec.get("timings_ms", {}).get("eval")}
