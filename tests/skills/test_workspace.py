"""The agent workspace template and the bundled tasks (CPU, fast: no compile)."""
import glob
import os
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "skills", "eval_worker"))
sys.path.insert(0, os.path.join(ROOT, "skills"))

from caf_agent_eval import static_checks  # noqa: E402
from caf_agent_eval.task import Task  # noqa: E402
import make_workspace  # noqa: E402

TASKS = sorted(glob.glob(os.path.join(ROOT, "skills", "tasks", "*.py")))


def test_at_least_five_tasks():
    assert len(TASKS) >= 5


@pytest.mark.parametrize("path", TASKS, ids=os.path.basename)
def test_task_loads_and_runs_fast_on_cpu(tmp_path, path):
    import torch
    t = Task(os.path.basename(path), open(path).read(), str(tmp_path))
    init = t.init_inputs(1)
    model = t.make_model(init, 2, "cpu")
    x = t.inputs(3, "cpu")
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model(*x)
    # Rationale: a bundled task must stay small enough for CPU episodes; 5 s (a few hundred ms
    # when idle) is a bound on its size that a loaded CI machine still meets, not a benchmark.
    assert time.perf_counter() - t0 < 5.0
    assert isinstance(out, torch.Tensor) and torch.isfinite(out).all()
    # the same seed gives the same inputs; another seed different ones
    assert torch.equal(t.inputs(3, "cpu")[0], x[0])
    assert not torch.equal(t.inputs(4, "cpu")[0], x[0])


def test_make_workspace_cpu(tmp_path):
    ws = make_workspace.make("softmax", "cpu", str(tmp_path / "ws"))
    for f in ("SKILL.md", "model.py", "model_new.py", "compile", "verify", "profile",
              "include/caf_kernel.h", ".harness/caf_agent_eval/worker.py", ".flavour"):
        assert os.path.exists(os.path.join(ws, f)), f
    assert os.access(os.path.join(ws, "compile"), os.X_OK)
    assert open(os.path.join(ws, ".flavour")).read().strip() == "cpu"
    # the starter passes the static checks (it fails verification only because it is empty)
    assert static_checks.check_python(open(os.path.join(ws, "model_new.py")).read()) == []


def test_skill_md_states_the_rules():
    text = open(os.path.join(ROOT, "skills", "workspace", "SKILL.md")).read()
    for phrase in ("5%", "torch.compile", "cuBLAS", "cuDNN", "kernels/", "./compile", "./verify",
                   "./profile", "Optimization checklist"):
        assert phrase in text, phrase
