"""Outputs that change after forward returned (work left running: a thread, an unsynchronised
stream). The child compares small outputs with their snapshots once, after the job's last
check and its wait (child.DEFER_LATE_BYTES), instead of after a wait per check: an earlier
check's late write is still caught, and named. These drive the child's own call() with a
model that writes late from a thread the test starts: a submission cannot start one (static
and native-code checks), so the check is the last line, tested here on its own."""
import os
import sys
import threading
import time

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "skills", "eval_worker"))

from caf_agent_eval import child as child_mod, profile, protocol  # noqa: E402


class LateWriter(torch.nn.Module):
    """Returns a tensor made outside the dispatcher guard; on the calls in `late`, a thread
    overwrites it once the child's late-write wait begins (the `waits` fixture releases it
    there and lets it finish): work that lands after return, without a race on a loaded box."""

    def __init__(self, late: set):
        super().__init__()
        self.late, self.calls, self.writers = late, 0, []

    def forward(self, x):
        self.calls += 1
        out = self.prepared.pop(0)
        if self.calls in self.late:
            go = threading.Event()

            def write():
                go.wait(10)
                out.fill_(-1.0)
            th = threading.Thread(target=write, daemon=True)
            th.start()
            self.writers.append((go, th))
        return out


@pytest.fixture(autouse=True)
def waits(monkeypatch):
    """The child's late-write wait (child.time.sleep) first lets every pending writer write."""
    real = time.sleep
    models = []

    def sleep(s):
        for m in models:
            for go, th in m.writers:
                go.set()
                th.join(10)
            m.writers = []
        real(s)
    monkeypatch.setattr(child_mod.time, "sleep", sleep)
    return models


def make_child(model) -> child_mod.Child:
    c = child_mod.Child.__new__(child_mod.Child)  # no pipes: call() only
    c.torch, c.protocol, c.Tensor, c.device = torch, protocol, torch.Tensor, "cpu"
    c.timers = profile.Timers("cpu")
    c.model, c.kept, c.pending, c.checks_done = model, [], [], 0
    c.out_specs = [[8, "float32"]]
    c.threads_before = 10**6  # the thread-count check is not what these tests look at
    c.ipc, c.exported, c.ipc_min_bytes = False, {}, 1 << 16
    c.task_mod = None
    return c


def run_checks(waits, model, n=5):
    waits.append(model)
    model.prepared = [torch.full((8,), float(k)) for k in range(n)]
    c = make_child(model)
    reps = []
    for k in range(n):
        req = {"op": "call", "inputs": protocol.encode_value([torch.zeros(8)]), "settle": k + 1 == n}
        reps.append(c.call(req))
    return reps


def test_a_late_write_after_an_early_check_is_caught_at_the_last(waits):
    reps = run_checks(waits, LateWriter(late={2}))
    assert all(not r.get("flags") for r in reps[:4]), [r.get("flags") for r in reps]
    assert any("output 0 of check 2 changed after forward returned" in f for f in reps[4]["flags"]), reps[4]


def test_a_late_write_in_the_last_check_is_caught(waits):
    reps = run_checks(waits, LateWriter(late={5}))
    assert any(f.startswith("output 0 changed after forward returned") for f in reps[4]["flags"]), reps[4]


def test_honest_outputs_raise_no_flag_and_one_wait_serves_the_job(waits, monkeypatch):
    calls = []
    inner = child_mod.time.sleep
    monkeypatch.setattr(child_mod.time, "sleep", lambda s: (calls.append(s), inner(s)))
    reps = run_checks(waits, LateWriter(late=set()))
    assert all(not r.get("flags") for r in reps)
    assert calls == [child_mod.LATE_WRITE_WAIT_S]  # one wait for the five checks, not five


def test_a_request_without_settle_waits_as_before(waits):
    model = LateWriter(late={1})
    waits.append(model)
    model.prepared = [torch.ones(8)]
    c = make_child(model)
    rep = c.call({"op": "call", "inputs": protocol.encode_value([torch.zeros(8)])})
    assert any("changed after forward returned" in f for f in rep["flags"]), rep
