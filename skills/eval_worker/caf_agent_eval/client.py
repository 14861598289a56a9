"""A Python client of the worker protocol (tests, benchmarks, the workspace's local
verify/profile scripts). The production client is gpu_pool/worker_process.cpp."""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time

from . import protocol

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class WorkerClient:
    """Starts `python -m caf_agent_eval.worker` and exchanges frames with it."""

    def __init__(self, device: str = "cpu", threads: int = 0, build_root: str | None = None,
                 env: dict | None = None, python: str | None = None, build_only: bool = False,
                 stderr=None):
        """stderr: where the worker's log goes (a file object or descriptor; default: ours)."""
        e = dict(os.environ)
        e["PYTHONPATH"] = PACKAGE_ROOT + os.pathsep + e.get("PYTHONPATH", "")
        if build_root:
            e["CAF_EVAL_BUILD_ROOT"] = build_root
        e.update(env or {})
        cmd = [python or sys.executable, "-m", "caf_agent_eval.worker", "--device", device,
               "--threads", str(threads)] + (["--build-only"] if build_only else [])
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=e, stderr=stderr)

    def request(self, obj: dict, timeout_s: float = 600.0) -> dict:
        protocol.write_frame(self.proc.stdin.fileno(), obj)
        return protocol.read_frame(self.proc.stdout.fileno(), time.monotonic() + timeout_s)

    def evaluate(self, task_name: str, model_py: str, files: dict, mode: str = "verify",
                 options: dict | None = None, job_id: str | None = None,
                 timeout_s: float = 600.0) -> dict:
        """Sends one eval request and returns the response map."""
        req = {"op": "eval", "job_id": job_id or secrets.token_hex(4), "mode": mode,
               "task": {"name": task_name, "model_py": model_py}, "files": files,
               "seed_secret": secrets.token_hex(16), "options": options or {}}
        return self.request(req, timeout_s)

    def close(self) -> None:
        try:
            self.request({"op": "shutdown"}, 30)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def read_submission(workspace: str) -> dict:
    """model_new.py and kernels/** of a workspace, as the episode actor would send them."""
    files = {}
    with open(os.path.join(workspace, "model_new.py")) as f:
        files["model_new.py"] = f.read()
    kdir = os.path.join(workspace, "kernels")
    for root, _, names in os.walk(kdir):
        for n in sorted(names):
            p = os.path.join(root, n)
            rel = os.path.relpath(p, workspace).replace(os.sep, "/")
            if rel.endswith((".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp")):
                with open(p) as f:
                    files[rel] = f.read()
    return files
