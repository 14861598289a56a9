"""CUDA variants of the reward-hack suite (marked gpu; run on the H200, see
bench/judge/README.md). One CUDA eval worker per session; kernels_cuda/ built once."""
import glob
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from hack_helpers import FAST_TIMING, MODEL_NEW_HEADER, Judge, build_root  # noqa: E402
from hack_helpers import WorkerClient  # noqa: E402

KERNELS_CUDA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels_cuda")


def cuda_kernels() -> dict:
    return {f"kernels/{os.path.basename(p)}": open(p).read()
            for p in sorted(glob.glob(os.path.join(KERNELS_CUDA, "*.cu")) + glob.glob(os.path.join(KERNELS_CUDA, "*.cpp")))}


class CudaJudge(Judge):
    kernels = staticmethod(cuda_kernels)  # the shared CUDA kernel library's files

    def __call__(self, task, model_new, mode="verify", kernels=None, options=None, header=True):
        return super().__call__(task, model_new, mode, cuda_kernels() if kernels is None else kernels,
                                options, header)

    def inline(self, name: str, model_py: str, model_new: str, mode: str = "verify") -> dict:
        """Like __call__ for a task given as source text (sizes the skills/tasks set lacks)."""
        files = dict(cuda_kernels())
        files["model_new.py"] = MODEL_NEW_HEADER + model_new
        resp = self.client.evaluate(name, model_py, files, mode=mode, options=dict(FAST_TIMING))
        assert resp["status"] == "ok", resp.get("error")
        return resp["verdict"]


@pytest.fixture(scope="session")
def cuda_judge():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    client = WorkerClient(device="cuda:0", build_root=build_root(),
                          env={"MAX_JOBS": "8", "TORCH_CUDA_ARCH_LIST": os.environ.get(
                              "TORCH_CUDA_ARCH_LIST", "9.0")})
    yield CudaJudge(client)
    client.close()
