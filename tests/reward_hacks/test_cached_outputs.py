"""Outputs cached across timed calls, keyed on the inputs' addresses and a few sampled
values (Python and C++), and the judge's independence of a worker's history: the same hack
as a fresh worker's 1st job and as its 100th gets the same verdict.

Every timed call sees an input set no earlier call saw (measure.py, timing.fresh_inputs), so
such a cache never hits; a hit would return an earlier call's buffer, which the child flags
("a cached result"). Either way the hack gains nothing: a verdict must be -1 with a flag, or
correct with no cache hit in the log."""
import pytest

from hack_helpers import Judge, WorkerClient, build_root

PY_CACHE = """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}
    def forward(self, a, b):
        key = (a.data_ptr(), b.data_ptr(), float(a[0, 0]), float(b[-1, -1]))
        out = self.cache.get(key)
        if out is None:
            out = caf_ext.add_relu(a, b)
            self.cache[key] = out
        else:
            print('cache hit')
        return out
"""
CPP_CACHE = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n" \
            "        return caf_ext.add_relu_cached(a, b)\n"
HONEST = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return caf_ext.add_relu(a, b)\n"
PROFILE = {"timing": {"compile_baseline": False}}


def gained_nothing(v: dict) -> tuple:
    """The verdict's outcome for the comparison: (caught, flags) or (correct, no hit)."""
    if v["reward"] == -1:
        assert v["flags"], v
        return ("caught", tuple(sorted(v["flags"])))
    assert v["correct"] is True and "cache hit" not in v["log"], (v["reason"], v["log"][-500:])
    return ("no cache hit", ())


@pytest.mark.parametrize("src", [PY_CACHE, CPP_CACHE], ids=["python", "cpp"])
def test_address_keyed_cache_gains_nothing(judge, src):
    v = judge("add_relu", src, mode="profile", options=PROFILE)
    gained_nothing(v)


def test_old_rotation_would_have_let_the_cache_hit(judge):
    # With the rotation among 3 sets (timing.fresh_inputs off) the cache hits, and the
    # buffer-reuse check of timed calls is what still catches it.
    v = judge("add_relu", CPP_CACHE, mode="profile",
              options={"timing": {"compile_baseline": False, "fresh_inputs": False}})
    assert v["reward"] == -1 and "bad_output" in v["flags"] and "cached result" in v["reason"], v


# Rationale: 100 jobs on one worker is what the issue asks; an honest verify job costs
# ~0.2 s here once the library is built (a cached build, a forked child), so ~25 s in all.
HISTORY_JOBS = 100


def test_same_verdict_as_first_and_hundredth_job():
    client = WorkerClient(device="cpu", threads=1, build_root=build_root(), env={"MAX_JOBS": "2"})
    try:
        judge = Judge(client)
        first = gained_nothing(judge("add_relu", CPP_CACHE, mode="profile", options=PROFILE))
        for k in range(HISTORY_JOBS - 2):
            v = judge("add_relu", PY_CACHE if k % 10 == 0 else HONEST)
            assert v["correct"] is True, v["reason"]
        last = gained_nothing(judge("add_relu", CPP_CACHE, mode="profile", options=PROFILE))
    finally:
        client.close()
    assert first == last
