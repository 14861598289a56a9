"""Baselines are measured once and shared: a profile job whose task's baselines are not
cached measures them in the worker before its child loads the submission and stores them in
the one baseline cache (baseline_cache.py); another worker with the same cache directory (a
fresh process: another slot of the node) takes them from there and measures nothing."""
import os

from hack_helpers import FAST_TIMING, Judge, WorkerClient, build_root

AB = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return caf_ext.add_relu(a, b)\n"
# No torch.compile baseline here: inductor on a 2-core CI box costs ~15 s; the sharing is
# the same for both baselines (the compile one is covered by the GPU bench).
OPTIONS = {"timing": {**FAST_TIMING["timing"], "compile_baseline": False}}


def profile_on_a_fresh_worker(baseline_dir: str) -> dict:
    env = {"MAX_JOBS": "2", "CAF_EVAL_BASELINE_DIR": baseline_dir}
    client = WorkerClient(device="cpu", threads=1, build_root=build_root(), env=env)
    try:
        return Judge(client)("add_relu", AB, mode="profile", options=OPTIONS)
    finally:
        client.close()


def test_a_second_worker_takes_the_first_workers_baselines(tmp_path):
    d = str(tmp_path / "baselines")
    first = profile_on_a_fresh_worker(d)
    assert first["correct"] is True, first["reason"]
    assert first["baseline_cache"] == "measured"
    assert os.listdir(d), "the measured baseline was not written to the shared directory"
    second = profile_on_a_fresh_worker(d)
    assert second["correct"] is True, second["reason"]
    assert second["baseline_cache"] == "disk"
    assert second["timings"]["eager_ms"] == first["timings"]["eager_ms"]  # the same measurement
    # The second job measured nothing: its baseline phase is a file read.
    assert second["phases_s"]["baselines"] < min(0.1, first["phases_s"]["baselines"])


def test_a_worker_without_the_entry_measures_it(tmp_path):
    v = profile_on_a_fresh_worker(str(tmp_path / "empty"))
    assert v["correct"] is True, v["reason"]
    assert v["baseline_cache"] == "measured" and v["timings"]["eager_ms"] > 0
