"""The baseline jobs' GPU lock (skills/eval_worker/caf_agent_eval/baseline.py, with
CAF_EVAL_TIMING_LOCK): GPU work of several slots shares it, a timing turn has the GPU to
itself, and a timing turn that waits is not starved by shared turns asked for after it.
Threads stand for slots: each turn opens the files itself, so flock sees separate holders."""
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "skills", "eval_worker"))
from caf_agent_eval import baseline  # noqa: E402


class Holder(threading.Thread):
    """Takes one turn, notes when it got it, holds it until released."""

    def __init__(self, name, turn, events):
        super().__init__(daemon=True)
        self.name_, self.turn, self.events = name, turn, events
        self.got, self.release = threading.Event(), threading.Event()

    def run(self):
        with self.turn():
            self.events.append(self.name_)
            self.got.set()
            self.release.wait(30)


def _waiting(h, s=0.3):
    return not h.got.wait(s)


def test_shared_turns_overlap_and_a_waiting_timing_turn_goes_first(tmp_path, monkeypatch):
    monkeypatch.setenv(baseline.ENV_LOCK, str(tmp_path / "gpu.lock"))
    events = []
    r1 = Holder("r1", baseline.gpu_turn, events)
    r2 = Holder("r2", baseline.gpu_turn, events)
    r1.start(); assert r1.got.wait(10)
    r2.start(); assert r2.got.wait(10)  # two slots validate side by side
    w = Holder("w", baseline.timing_turn, events)
    w.start()
    assert _waiting(w)  # timing waits for the GPU work in flight
    time.sleep(0.1)
    r3 = Holder("r3", baseline.gpu_turn, events)
    r3.start()
    assert _waiting(r3)  # a shared turn asked for after the timing turn waits behind it
    r1.release.set(); r2.release.set()
    assert w.got.wait(10)
    assert _waiting(r3)  # nothing beside the timing turn
    w2 = Holder("w2", baseline.timing_turn, events)
    w2.start()
    assert _waiting(w2, 0.2)  # nor another timing turn
    w.release.set()
    for h in (r3, w2):
        assert h.got.wait(10)
        h.release.set()
    for h in (r1, r2, w, r3, w2):
        h.join(10)
    assert events[:3] == ["r1", "r2", "w"], events
    assert sorted(events[3:]) == ["r3", "w2"], events


def test_without_the_variable_turns_do_not_wait(monkeypatch):
    monkeypatch.delenv(baseline.ENV_LOCK, raising=False)
    with baseline.timing_turn() as a, baseline.timing_turn() as b, baseline.gpu_turn() as c:
        assert a == b == c == 0.0


def test_compiling_and_the_compiled_first_calls_never_run_beside_a_timing_turn(tmp_path, monkeypatch):
    # torch.compile's first calls run inductor's autotuning and the compiled kernels on the GPU:
    # outside the lock they ran beside other slots' timed rounds (call 8 of
    # bench/results/2026-12-03-kernelbench-h200.md). _compile must wait for a timing turn.
    monkeypatch.setenv(baseline.ENV_LOCK, str(tmp_path / "gpu.lock"))
    calls = []

    def compiled(*args):
        calls.append(args)
        return args[0]

    monkeypatch.setattr(baseline.torch, "compile", lambda model: compiled)
    timing = Holder("timing", baseline.timing_turn, [])
    timing.start()
    assert timing.got.wait(10)
    out = {}
    t = threading.Thread(target=lambda: out.update(
        zip(("fns", "error"), baseline._compile(lambda x: x, [(1,), (2,)], {"compile_baseline": True},
                                                out.setdefault("seconds", {})))), daemon=True)
    t.start()
    time.sleep(0.4)
    assert calls == [] and "fns" not in out  # no compiled call while another slot times
    timing.release.set()
    t.join(10)
    assert calls == [(1,), (2,)] and out["error"] == ""
    assert sorted(out["fns"]) == ["compile", "eager"]
    assert out["seconds"]["compile_gpu_wait"] >= 0.3
    timing.join(10)
