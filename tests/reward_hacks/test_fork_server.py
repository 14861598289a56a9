"""The fork server that starts each job's child (skills/eval_worker/caf_agent_eval/zygote.py):
children are fresh processes that share no state across jobs, crashes are still reported
with their signal, and a worker without the server (or whose server fails) spawns children."""
import os
import signal
import sys

from hack_helpers import ROOT, Judge, WorkerClient, build_root

sys.path.insert(0, os.path.join(ROOT, "skills", "eval_worker"))
from caf_agent_eval.child_client import ChildCrashed, ChildProcess, Zygote  # noqa: E402

AB = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"
HONEST = AB + "        return caf_ext.add_relu(a, b)\n"
COUNTER = ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        print('calls in this process:', int(caf_ext.process_calls(torch.zeros(1))[0]))\n"
           "    def forward(self, a, b):\n        return caf_ext.add_relu(a, b)\n")


def test_jobs_run_in_forked_children_that_share_no_state(judge):
    logs = []
    for _ in range(2):
        v = judge("add_relu", COUNTER)
        assert v["correct"] is True, v["reason"]
        assert v["child_start"] == "forked", v
        logs.append(v["log"])
    # The extension's static counter starts at 1 in each job: a fresh process every time.
    assert all("calls in this process: 1" in log for log in logs), logs


def test_worker_without_fork_server_spawns_children():
    client = WorkerClient(device="cpu", threads=1, build_root=build_root(),
                          env={"CAF_EVAL_ZYGOTE": "0", "MAX_JOBS": "2"})
    try:
        v = Judge(client)("add_relu", HONEST)
    finally:
        client.close()
    assert v["correct"] is True, v["reason"]
    assert v["child_start"] == "spawned", v


def _two_jobs(fail: str) -> tuple[dict, dict]:
    client = WorkerClient(device="cpu", threads=1, build_root=build_root(),
                          env={"CAF_EVAL_TEST_HOOKS": "1", "CAF_EVAL_ZYGOTE_FAIL": fail, "MAX_JOBS": "2"})
    try:
        judge = Judge(client)
        first, second = judge("add_relu", HONEST), judge("add_relu", HONEST)
    finally:
        client.close()
    assert first["correct"] is True and second["correct"] is True, (first["reason"], second["reason"])
    return first, second


def test_failed_fork_server_falls_back_to_spawned_children():
    first, second = _two_jobs("exit")
    assert first["child_start"] == second["child_start"] == "spawned"


def test_fork_server_that_initialised_cuda_is_replaced_by_a_lite_one():
    first, second = _two_jobs("cuda")
    assert first["child_start"] == second["child_start"] == "forked (lite server)"


def test_forked_child_lifecycle_kill_crash_and_reap():
    z = Zygote("cpu", 1)
    try:
        c = ChildProcess("cpu", 1, z)
        c.wait_ready(300)
        assert os.getpgid(c.proc.pid) == c.proc.pid  # own process group: killpg reaches compilers
        c.kill()
        assert c.proc.returncode == -signal.SIGKILL

        c = ChildProcess("cpu", 1, z)
        c.wait_ready(60)
        os.kill(c.proc.pid, signal.SIGSEGV)
        try:
            c.request({"op": "time", "order": []}, 10, "probe")
            raise AssertionError("the crashed child answered")
        except ChildCrashed as e:
            assert "SIGSEGV" in str(e), e
        c.kill()
    finally:
        z.close()
    assert z.proc.returncode == 0
