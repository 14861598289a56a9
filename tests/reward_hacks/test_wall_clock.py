"""The parent's clock is authoritative (measure.check_wall_clock): a child whose claimed call
times disagree with what the parent's clock implies is flagged `timer_mismatch`, and the
harness an honest child's rounds cost is measured on the same path (calibration rounds in the
same child), not assumed from the parent's own rounds."""
import pytest

from hack_helpers import FAST_TIMING, Judge, WorkerClient, build_root

from caf_agent_eval import measure

LINEAR = ("class ModelNew(nn.Module):\n    def __init__(self, i, o):\n        super().__init__()\n"
          "        self.linear = nn.Linear(i, o)\n    def forward(self, x):\n"
          "        return caf_ext.linear_gelu_naive(x, self.linear.weight, self.linear.bias)\n")
# No torch.compile baseline: seconds of CI time that the cross-check does not need.
NO_COMPILE = {"timing": dict(FAST_TIMING["timing"], compile_baseline=False)}


def test_a_large_harness_measured_on_the_same_path_is_not_a_mismatch():
    # The H200 case of 2026-12-01: a 32 MB task's child rounds took ~100 ms on the parent's
    # clock for 10 calls claiming 5.6 ms; the calibration rounds of the same child cost the same.
    rounds = [(5.6, 10, 0.03, 100.9, 99.0), (5.7, 10, 0.03, 104.0, None)]
    calib = [(96.0, 0.03, None), (98.5, 0.03, None)]
    c = measure.check_wall_clock(rounds, calib, cuda=True)
    assert not c["flag"], c
    assert c["summary"]["harness_ms_per_round"] == pytest.approx(96.0 - 15 * 0.03)


def test_a_slowed_clock_is_a_mismatch_even_beside_a_large_harness():
    # Real calls of 2 ms each (20 ms a round) claimed as 0.1 ms each, harness 90 ms a round.
    rounds = [(1.0, 10, 0.1, 110.0, None), (1.0, 10, 0.1, 111.0, None)]
    calib = [(90.0 + 15 * 0.1, 0.1, None), (91.0 + 15 * 0.1, 0.1, None)]
    c = measure.check_wall_clock(rounds, calib, cuda=True)
    assert c["flag"] and "timer mismatch" in c["reason"], c


def test_without_calibration_the_whole_round_counts():
    c = measure.check_wall_clock([(1.0, 10, 0.1, 50.0, None)], [], cuda=False)
    assert c["flag"], c


@pytest.fixture(scope="module")
def lying_judge(tmp_path_factory):
    path = tmp_path_factory.mktemp("clock") / "mode"
    path.write_text("")
    client = WorkerClient(device="cpu", threads=1, build_root=build_root(),
                          env={"CAF_EVAL_TEST_HOOKS": "1", "CAF_EVAL_CHILD_LIE_FILE": str(path),
                               "MAX_JOBS": "2"})
    yield Judge(client), path
    client.close()


def test_an_honest_profile_passes_the_cross_check(lying_judge):
    judge, path = lying_judge
    path.write_text("")
    v = judge("linear_bias_gelu", LINEAR, mode="profile", options=NO_COMPILE)
    assert v["correct"] is True, v["reason"]
    assert "timer_mismatch" not in v["flags"]
    w = v["timings"]["wall_check"]
    assert len(w["calibration_ms"]) == 2 and w["best_ratio"] >= measure.WALL_RATIO_MIN, w


@pytest.mark.parametrize("lie", ["slow_clock", "events_only"])
def test_a_child_reporting_times_that_did_not_happen_is_flagged(lying_judge, lie):
    # slow_clock: every number the child reports is 1/20 of the truth; events_only: the walls
    # are honest and only the event times (what the reward uses) are forged, which the
    # previous check (walls against the parent's clock) let through.
    judge, path = lying_judge
    path.write_text(lie)
    try:
        v = judge("linear_bias_gelu", LINEAR, mode="profile", options=NO_COMPILE)
    finally:
        path.write_text("")
    assert v["reward"] == -1 and "timer_mismatch" in v["flags"], (v["flags"], v["reason"], v["timings"])
    assert "timer mismatch" in v["reason"]


class _WarmChild:
    """Answers warm-up `time` requests with a fixed per-call time."""

    def __init__(self):
        self.rounds = 0

    def request(self, req, timeout, what):
        self.rounds += 1
        return {"wall": [0.6] * len(req["order"]), "primary": [0.1] * len(req["order"])}


def test_the_warm_up_ends_early_only_at_a_clock_a_full_warm_up_reached():
    # The warm-up's 0.25 s on a GPU is skipped once the worker measures the SM clock at the
    # mark its first, full warm-up left; a cold GPU (a low clock) still gets the full time.
    from caf_agent_eval import options
    t = options.merge({"timing": {"warmup_s": 0.25}})["timing"]
    o = {"round_timeout_s": 60}
    seen, rates = {}, iter([465.0] + [1980.0] * 100)  # the clock rises during the warm-up
    first = _WarmChild()
    spent = measure.warm_up(first, 3, t, o, "cuda:0", clock=lambda: next(rates) * 1e3, seen=seen)
    assert spent >= 0.25 and seen["max"] == 1980.0e3 and not seen.get("early")
    warm = _WarmChild()
    spent = measure.warm_up(warm, 3, t, o, "cuda:0", clock=lambda: 1975.0e3, seen=seen)
    assert warm.rounds == 1 and spent < 0.01 and seen["early"] == 1
    cold = _WarmChild()
    spent = measure.warm_up(cold, 3, t, o, "cuda:0", clock=lambda: 465.0e3, seen=seen)
    assert spent >= 0.25 and seen["max"] == 1980.0e3
