"""The local (human) form of the workspace's verify/profile commands: starts a worker,
sends the workspace's files with its model.py, prints the verdict."""
from __future__ import annotations

import json
import os

from .client import WorkerClient, read_submission


def main(workspace: str, mode: str) -> int:
    """Judges the workspace; returns a process exit code (0 when correct)."""
    flavour_file = os.path.join(workspace, ".flavour")
    flavour = open(flavour_file).read().strip() if os.path.exists(flavour_file) else "cpu"
    device = "cuda:0" if flavour == "cuda" else "cpu"
    with open(os.path.join(workspace, "model.py")) as f:
        model_py = f.read()
    client = WorkerClient(device=device, build_root=os.path.join(workspace, "build", "judge"))
    try:
        resp = client.evaluate(os.path.basename(workspace), model_py, read_submission(workspace), mode)
    finally:
        client.close()
    if resp.get("status") != "ok":
        print("infrastructure error:", resp.get("error"))
        return 2
    v = resp["verdict"]
    print("correct:", v["correct"])
    if v["reason"]:
        print("reason:", v["reason"])
    if v.get("timings"):
        print("timings:", json.dumps(v["timings"], indent=1))
        print(f"speedup vs eager: {v['speedup_eager']:.3f}  vs torch.compile: "
              f"{(v['speedup_compile'] or 0):.3f}  reward: {v['reward']}")
    if v.get("compile_log") and not v["correct"]:
        print("compile log:\n" + v["compile_log"])
    if v.get("log"):
        print("your output:\n" + v["log"])
    return 0 if v["correct"] else 1
