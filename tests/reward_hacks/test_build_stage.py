"""The worker's `build` request (a build stage ahead of the slot): it compiles into the
build root the jobs' children use, so the job that follows finds the library built; it
refuses bad requests clearly, skips sources the static checks reject, and a compile past
its deadline is killed."""
import secrets

from hack_helpers import Judge, WorkerClient, build_root, cpu_kernels

AB = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"
SCALE = '''#include "caf_kernel.h"
// nonce {nonce}
torch::Tensor scale_{nonce}(torch::Tensor a) {{ return torch::empty_like(a); }}
CAF_REGISTER(m) {{ m.def("scale_{nonce}", &scale_{nonce}); }}
'''


def test_a_built_submission_is_cached_for_its_job(judge):
    nonce = "n" + secrets.token_hex(6)
    kernels = {**cpu_kernels(), "kernels/extra.cpp": SCALE.format(nonce=nonce)}
    rep = judge.client.request({"op": "build", "job_id": "b1", "files": kernels}, 600)
    assert rep["status"] == "ok" and rep["ok"] is True and rep["cached"] is False, rep
    assert rep["seconds"]["total"] > 0 and "kernels/extra.cpp" in rep["seconds"]
    v = judge("add_relu", AB + "        return caf_ext.add_relu(a, b)\n", kernels=kernels)
    assert v["correct"] is True, v["reason"]
    assert v["cached_build"] is True  # the slot's child did not compile
    again = judge.client.request({"op": "build", "job_id": "b2", "files": kernels}, 600)
    assert again["ok"] is True and again["cached"] is True


def test_bad_build_requests_get_clear_errors(judge):
    for req, words in [({"files": "kernels"}, "files must map"),
                       ({"files": {}, "flavour": "tpu"}, "flavour must be"),
                       ({"files": {}, "timeout_s": -1}, "timeout_s")]:
        rep = judge.client.request({"op": "build", "job_id": "bad", **req}, 60)
        assert rep["status"] == "infra_error" and words in rep["error"], rep


def test_statically_rejected_sources_are_not_compiled(judge):
    src = '#include "caf_kernel.h"\n#include <fstream>\nvoid f() {}\n'
    rep = judge.client.request({"op": "build", "job_id": "s", "files": {"kernels/a.cpp": src}}, 60)
    assert rep["status"] == "ok" and rep["ok"] is False and "static checks failed" in rep["log"], rep
    assert rep["seconds"] == {}


def test_a_compile_past_its_deadline_is_killed(judge):
    # 262144 statements on a volatile: gcc -O3 needs far longer than the 2 s deadline.
    slow = ('#include "caf_kernel.h"\n// ' + secrets.token_hex(6) + '\n#define A(x) x x x x\n'
            'volatile long s;\nvoid busy() { A(A(A(A(A(A(A(A(A(s += 1;))))))))) }\n')
    rep = judge.client.request({"op": "build", "job_id": "t", "files": {"kernels/slow.cpp": slow},
                                "timeout_s": 2.0}, 120)
    assert rep["status"] == "ok" and rep["ok"] is False, rep
    assert "timed out after" in rep["log"], rep["log"][-800:]
    assert rep["seconds"]["total"] < 30


def test_the_worker_still_judges_after_build_requests(judge: Judge):
    v = judge("add_relu", AB + "        return caf_ext.add_relu(a, b)\n")
    assert v["correct"] is True, v["reason"]


def test_a_build_only_worker_builds_for_a_judging_worker_and_judges_nothing(judge):
    """The pool's build stage: a separate --build-only worker sharing the judging worker's
    build root compiles; the judging worker's job then finds the library built."""
    nonce = "n" + secrets.token_hex(6)
    kernels = {**cpu_kernels(), "kernels/extra.cpp": SCALE.format(nonce=nonce)}
    builder = WorkerClient(device="cpu", build_root=build_root(), build_only=True)
    try:
        assert builder.request({"op": "ping"}, 120)["status"] == "ok"
        rep = builder.request({"op": "build", "job_id": "b", "files": kernels}, 600)
        assert rep["status"] == "ok" and rep["ok"] is True and rep["cached"] is False, rep
        refused = builder.request({"op": "eval", "job_id": "e", "mode": "verify",
                                   "task_name": "t", "model_py": "", "files": {}}, 60)
        assert refused["status"] == "infra_error" and "--build-only" in refused["error"]
    finally:
        builder.close()
    v = judge("add_relu", AB + "        return caf_ext.add_relu(a, b)\n", kernels=kernels)
    assert v["correct"] is True and v["cached_build"] is True, v["reason"]
