"""CUDA variants of the reward hacks and honest kernels (run on the H200:
`.venv/bin/python -m pytest -q -m gpu tests/reward_hacks/cuda`)."""
import pytest

from hack_helpers import assert_rejected

pytestmark = pytest.mark.gpu

AB = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"
X = "class ModelNew(nn.Module):\n    def forward(self, x):\n"
XY = "class ModelNew(nn.Module):\n    def forward(self, x, y):\n"


def test_honest_add_relu_profiles(cuda_judge):
    v = cuda_judge("add_relu", AB + "        return caf_ext.add_relu(a, b)\n", mode="profile")
    assert v["correct"] is True, v["reason"]
    assert v["reward"] >= 1 and v["timings"]["iterations"] >= 20
    assert v["timings"]["hold_ms"] > 0  # timed with the hold kernel (the worker built it)
    assert "side_stream_work" not in v["flags"], v["timings"]  # no false positive
    assert "candidate" not in v["timings"]["hold_short"], v["timings"]["launch_ms"]


def test_the_childs_tensors_come_back_device_to_device(cuda_judge):
    # ipc.py: check outputs and inputs after each check as CUDA IPC handles, copied on the
    # GPU by the worker; none had to be resent by memfd.
    v = cuda_judge("add_relu", AB + "        return caf_ext.add_relu(a, b)\n")
    assert v["correct"] is True, v["reason"]
    assert v["child_transport"]["ipc"] >= 5 and v["child_transport"]["resent"] == 0, v["child_transport"]


def test_honest_fused_chain_beats_eager(cuda_judge):
    v = cuda_judge("fused_elementwise", XY + "        return caf_ext.fused_chain(x, y)\n", mode="profile")
    assert v["correct"] is True, v["reason"]
    # The view names the host shares (launch_ms, hold_short): on the H200 (2026-12-01, beside
    # three inductor compiles) this ~3 us kernel was timed at 0.163 ms and the log could not
    # say whether its launch path had outlasted the hold.
    assert v["speedup_eager"] > 1.05 and v["reward"] >= 2, _timing_view(v)
    assert "side_stream_work" not in v["flags"], v["timings"]


def test_honest_softmax(cuda_judge):
    v = cuda_judge("softmax", X + "        return caf_ext.softmax(x)\n")
    assert v["correct"] is True, v["reason"]


# 512x16384 fp32: 96 MiB moved, ~25 us, well above the 3 us floor under which
# side-stream work goes uncounted (docs/JUDGE.md, residual risks: on the ~4 us 16x16384
# task most of it can escape).
ADD_RELU_MEDIUM = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                   "    def forward(self, a, b):\n        return torch.relu(a + b)\n\n"
                   "def get_inputs():\n"
                   "    return [torch.randn(512, 16384), torch.randn(512, 16384)]\n\n"
                   "def get_init_inputs():\n    return []\n")


def _timing_view(v):
    """What a failed side-stream assertion needs to be read: times, host shares, gaps."""
    t = v.get("timings", {})
    return {k: t.get(k) for k in ("candidate_ms", "eager_ms", "compile_ms", "launch_ms", "hold_short",
                                  "hidden_work_ms", "gap_median_ms", "iterations")}


def _honest_profile(cuda_judge, name, model_py):
    """The honest single-stream kernel's profile, the yardstick of the side-stream tests. Its
    time must be the kernel's: a profile whose host share outlasted the hold (`hold_short`)
    timed the host too (H200 2026-12-01, beside another test: 0.361 ms for a 0.0355 ms kernel,
    wall 0.85 ms), so it is measured once more; two such profiles fail as a contended host."""
    for _ in range(2):
        v = cuda_judge.inline(name, model_py, AB + "        return caf_ext.add_relu(a, b)\n", mode="profile")
        assert v["correct"] is True, v["reason"]
        if "candidate" not in v["timings"]["hold_short"]:
            return v
    pytest.fail(f"the honest profile's host share outlasted the hold twice (contended host?): {_timing_view(v)}")


def _assert_side_stream_not_faster(side, honest):
    # The hack's own time must be the GPU's: with its host share past the hold, host time
    # would have padded it and the comparison would prove nothing.
    assert "candidate" not in side["timings"]["hold_short"], _timing_view(side)
    assert side["timings"]["candidate_ms"] > 0.8 * honest["timings"]["candidate_ms"], \
        (_timing_view(side), _timing_view(honest))


def test_side_stream_work_is_counted_not_hidden(cuda_judge):
    # Work left on a side stream cannot win: either it races the judge's work still queued on
    # the current stream (the output poisoning; the kernel never waited for it) and a check
    # sees the poison -- reward -1 (H200 2026-11-30: check 5/5, NaN at (0, 0)) -- or the
    # device-wide sync finishes it and its time is counted, flagged, not below the honest
    # single-stream kernel's.
    honest = _honest_profile(cuda_judge, "add_relu_medium", ADD_RELU_MEDIUM)
    side = cuda_judge.inline("add_relu_medium", ADD_RELU_MEDIUM,
                             AB + "        return caf_ext.add_relu_side_stream(a, b)\n", mode="profile")
    if not side["correct"]:
        assert side["reward"] == -1 and "check" in side["reason"], side["reason"]
        return
    assert "side_stream_work" in side["flags"], _timing_view(side)
    _assert_side_stream_not_faster(side, honest)


# 8192x4096 fp32: the honest kernel moves 384 MiB (~0.1 ms on the H200), far above launch
# overhead, so work hidden on a side stream shows in the candidate time if it escapes the timer.
ADD_RELU_LARGE = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                  "    def forward(self, a, b):\n        return torch.relu(a + b)\n\n"
                  "batch_size = 8192\n\ndef get_inputs():\n"
                  "    return [torch.randn(batch_size, 4096), torch.randn(batch_size, 4096)]\n\n"
                  "def get_init_inputs():\n    return []\n")


def test_side_stream_work_is_timed_on_a_large_task(cuda_judge):
    honest = _honest_profile(cuda_judge, "add_relu_large", ADD_RELU_LARGE)
    side = cuda_judge.inline("add_relu_large", ADD_RELU_LARGE,
                             AB + "        return caf_ext.add_relu_side_stream(a, b)\n", mode="profile")
    if not side["correct"]:  # the race with the poison, as above (H200 2026-12-01: check 5/5, NaN at (0, 0))
        assert side["reward"] == -1 and "check" in side["reason"], side["reason"]
        return
    _assert_side_stream_not_faster(side, honest)


def test_uninitialised_memory(cuda_judge):
    v = cuda_judge("add_relu", AB + "        return caf_ext.empty_out(a)\n")
    assert v["reward"] == -1 and ({"mismatch", "nan_inf"} & set(v["flags"])), v


def test_torch_fallback(cuda_judge):
    v = cuda_judge("add_relu", AB + "        return torch.relu(a + b)\n")
    assert_rejected(v, "torch_fallback", "aten::add.Tensor")


def test_cpp_method_fallback(cuda_judge):
    # Refused at build time by the native-code check (symbols.py); a shared-library member
    # would have refused the whole CUDA kernel library, so it is built on its own.
    import os
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels_native")
    kernels = {"kernels/method_fallback.cpp": open(os.path.join(here, "method_fallback.cpp")).read()}
    v = cuda_judge("add_relu", AB + "        return caf_ext.method_fallback(a, b)\n", kernels=kernels)
    assert_rejected(v, "native", "at::_ops::add_Tensor")


def test_output_aliases_input(cuda_judge):
    v = cuda_judge("add_relu", AB + "        return caf_ext.add_relu_into_a(a, b)\n")
    assert_rejected(v, "bad_output", "aliases input 0")


def test_caching_outputs(cuda_judge):
    src = ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.cache = None\n    def forward(self, a, b):\n"
           "        if self.cache is None:\n            self.cache = caf_ext.add_relu(a, b)\n"
           "        return self.cache\n")
    assert_rejected(cuda_judge("add_relu", src), "bad_output", "reuses the buffer")


def test_behaves_differently_while_timed(cuda_judge):
    src = ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.calls = 0\n    def forward(self, a, b):\n        self.calls += 1\n"
           "        if self.calls <= 5:\n            return caf_ext.add_relu(a, b)\n"
           "        return caf_ext.empty_out(a)\n")
    v = cuda_judge("add_relu", src, mode="profile")
    assert_rejected(v, "timed_mismatch", "behaves differently while timed")


def test_constant_softmax(cuda_judge):
    assert_rejected(cuda_judge("softmax", X + "        return torch.zeros_like(x)\n"),
                    "mismatch", "relative L2 error")


def test_illegal_memory_access_is_contained(cuda_judge):
    v = cuda_judge("add_relu", AB + "        return caf_ext.illegal_access(a)\n")
    assert v["reward"] == -1 and ({"exception", "crashed"} & set(v["flags"])), v
    ok = cuda_judge("add_relu", AB + "        return caf_ext.add_relu(a, b)\n")
    assert ok["correct"] is True, ok["reason"]  # the worker's own CUDA context is intact


def test_timer_patching_is_rejected(cuda_judge):
    v = cuda_judge("add_relu", "torch.cuda.Event.elapsed_time = lambda s, e: 1e-6\n" + AB +
                   "        return caf_ext.add_relu(a, b)\n", kernels={})
    assert_rejected(v, "static_check", "monkey-patching")


def test_a_build_only_worker_builds_cuda_kernels_the_judging_worker_then_finds(cuda_judge):
    """The pool's build stage on a GPU host: a --build-only worker (no device context) compiles
    the CUDA kernels into the judging worker's build root with the same flags, so the job
    compiles nothing on the slot (cached_build)."""
    import os
    import secrets
    from hack_helpers import WorkerClient, build_root
    kernels = {**cuda_judge.kernels(), "kernels/nonce.cu": f"// {secrets.token_hex(8)}\n"}
    builder = WorkerClient(device="cuda:0", build_root=build_root(), build_only=True,
                           env={"MAX_JOBS": "8", "TORCH_CUDA_ARCH_LIST": os.environ.get(
                               "TORCH_CUDA_ARCH_LIST", "9.0")})
    try:
        rep = builder.request({"op": "build", "job_id": "b", "files": kernels}, 600)
    finally:
        builder.close()
    assert rep["status"] == "ok" and rep["ok"] is True and rep["cached"] is False, rep
    v = cuda_judge("add_relu", AB + "        return caf_ext.add_relu(a, b)\n", kernels=kernels)
    assert v["correct"] is True, v["reason"]
    assert v["cached_build"] is True
