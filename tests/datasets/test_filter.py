"""Execution filtering: each criterion with a task made to fail it; slots survive hangs and
crashes."""
import pytest

from caf_agent_data.filter import run_job
from caf_agent_data.slots import SlotPool
from data_helpers import bundled, task

FAST = {"budget_s": 0.05, "min_iters": 3, "max_iters": 10, "min_ms": 0.0, "max_ms": 1e4}


def test_a_good_task_is_kept_with_its_times_and_shapes():
    r = run_job("relu", task("return torch.relu(x) * 2.0"), FAST)
    assert r["kept"], r
    assert r["eager_ms"] > 0 and r["input_shapes"] == [[8, 64]] and r["output_shapes"] == [[8, 64]]
    assert "compile_ms" not in r


@pytest.mark.parametrize("body,init,stage,words", [
    ("return torch.zeros_like(x) + 1.0", "", "reference", "does not depend on its input"),
    ("return x * 0.0 + self.w", "self.w = nn.Parameter(torch.randn(64))", "reference", "does not depend"),
    ("return x.sum() * 0.0 + torch.arange(64.0) * 100.0", "", "reference", "does not depend"),
    ("return x @ torch.ones(3, 3)", "", "reference", "reference raised"),
    ("return torch.nn.functional.dropout(x, 0.5, training=True)", "", "deterministic", "disagree"),
    ("return x.reshape(8, 64) * 2.0", "", "half_batch", "half the batch"),
    ("return torch.empty_like(x).normal_() + x", "", "deterministic", "disagree"),
])
def test_each_criterion_rejects_a_task_made_to_fail_it(body, init, stage, words):
    r = run_job("t", task(body, init), FAST)
    assert not r["kept"] and r["stage"] == stage, r
    assert words in r["reason"], r["reason"]


def test_constant_output_is_degenerate():
    r = run_job("c", task("return (x * 0.0 + 1.0).sum(dim=-1, keepdim=True) + torch.tanh(x).mean() * 1e-6"), FAST)
    assert not r["kept"] and r["stage"] == "reference" and ("constant" in r["reason"] or "depend" in r["reason"]), r


def test_eager_time_bounds():
    slow = run_job("s", bundled("linear_bias_gelu"), dict(FAST, max_ms=1e-4))
    assert slow["stage"] == "eager_time" and "outside" in slow["reason"] and slow["eager_ms"] > 1e-4
    fast = run_job("f", bundled("add_relu"), dict(FAST, min_ms=1e4))
    assert fast["stage"] == "eager_time"


def test_a_task_that_does_not_load_is_rejected():
    r = run_job("bad", "import torch\nraise RuntimeError('boom')\n", FAST)
    assert r["stage"] == "load" and "boom" in r["reason"]
    r = run_job("bad", "import torch\n", FAST)
    assert r["stage"] == "load" and "Model" in r["reason"]


@pytest.mark.slow
def test_compile_runs_and_is_timed():
    r = run_job("relu", bundled("add_relu"), dict(FAST, compile=True))
    assert r["kept"] and r["compile_ms"] > 0, r


def test_slots_survive_a_hang_and_a_crash():
    hang = task("while True:\n    pass")
    crash = task("import os\nos._exit(3)")
    # the good job first, on the warm slot: under a loaded machine a freshly restarted slot's
    # first job (imports included) can take longer than the short hang deadline
    jobs = [("ok", bundled("add_relu"), FAST), ("hang", hang, FAST), ("crash", crash, FAST)]
    with SlotPool(1, timeout_s=6.0) as pool:
        got = dict(pool.map(jobs))
        assert pool.restarts == 2
    assert got[0]["kept"], got[0]
    assert got[1]["stage"] == "timeout" and "restarted" in got[1]["reason"]
    assert got[2]["stage"] == "crash" and "exit code 3" in got[2]["reason"]


def test_a_stop_whose_raise_was_lost_in_a_finalizer_still_stops_the_pool():
    # Python runs a signal handler wherever the main thread is; inside a finalizer its
    # exception is printed as "Exception ignored" and dropped. The request it recorded must
    # still stop the pool's loop (the class behind a SIGTERM that let a pipeline run to its end).
    import gc
    from caf_agent_data import stop

    class Finalized:
        def __del__(self):
            stop.on_signal(15, None)

    stop.reset()
    try:
        Finalized()
        gc.collect()
        assert stop.requested() is not None  # the raise itself went nowhere
        jobs = [("ok", bundled("add_relu"), FAST)] * 3
        got = []
        with pytest.raises(stop.Stopped, match="signal 15"):
            with SlotPool(1, timeout_s=30.0) as pool:
                for r in pool.map(jobs):
                    got.append(r)
        assert got == []
    finally:
        stop.reset()
