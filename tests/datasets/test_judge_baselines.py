"""The judge's baseline job kind (skills/eval_worker's mode "baseline") through real eval
workers, its one cache (shared on disk by two workers, a rewritten file ignored), and
caf_agent_data.judge_baselines over a small KernelBench-shaped checkout: one row per task,
refusals with the judge's reasons, the per-level table."""
import glob
import json
import os
import sys

import pytest

from caf_agent_data import judge_baselines
from data_helpers import bundled, task, write

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "skills", "eval_worker"))
from caf_agent_eval.client import WorkerClient  # noqa: E402

EAGER = {"timing": {"compile_baseline": False, "budget_s": 0.1, "min_iters": 5}}


@pytest.fixture
def worker_factory(tmp_path):
    made = []

    def make(env=None):
        w = WorkerClient("cpu", threads=1, env={"CAF_EVAL_ZYGOTE": "0", **(env or {})})
        made.append(w)
        return w
    yield make
    for w in made:
        w.close()


def test_a_baseline_job_times_the_reference_and_a_second_worker_reads_it_from_disk(tmp_path, worker_factory):
    cache = tmp_path / "baselines"
    env = {"CAF_EVAL_BASELINE_DIR": str(cache)}
    src = bundled("add_relu")
    r = worker_factory(env).evaluate("add_relu", src, {}, mode="baseline", options=EAGER)
    assert r["status"] == "ok", r
    v = r["verdict"]
    assert v["flags"] == ["baseline"] and v["correct"] is False and v["reward"] is None
    assert v["timings"]["eager_ms"] > 0 and v["timings"]["compile_ms"] is None
    assert v["timings"]["calls"]["eager"] >= 5 and v["baseline"]["source"] == "measured"
    files = glob.glob(str(cache / "baseline-*.json"))
    assert len(files) == 1
    # another worker (another slot of the host) measures nothing: same numbers, from disk
    w2 = worker_factory(env)
    r2 = w2.evaluate("add_relu", src, {}, mode="baseline", options=EAGER)
    assert r2["verdict"]["baseline"]["source"] == "disk"
    assert r2["verdict"]["timings"]["eager_ms"] == v["timings"]["eager_ms"]
    # the same task with other comments and docstring is the same task (normalized source)
    other = "# a comment\n" + src.replace('"""Level 1: elementwise add', '"""Level 1: another docstring, add', 1)
    assert other != src
    r3 = w2.evaluate("copy", other, {}, mode="baseline", options=EAGER)
    assert r3["verdict"]["baseline"]["source"] == "memory"
    assert r3["verdict"]["baseline"]["cache_key"] == v["baseline"]["cache_key"]
    # a file rewritten in place (times scaled, as a judged child could) is never trusted
    doc = json.loads(open(files[0]).read())
    doc["base"]["eager"]["primary"] = [x * 100 for x in doc["base"]["eager"]["primary"]]
    with open(files[0], "w") as f:
        json.dump(doc, f)
    r4 = worker_factory(env).evaluate("add_relu", src, {}, mode="baseline", options=EAGER)
    assert r4["verdict"]["baseline"]["source"] == "measured"
    assert r4["verdict"]["timings"]["eager_ms"] < 50 * v["timings"]["eager_ms"]


def test_a_task_the_judge_cannot_judge_is_a_task_error_and_files_are_refused(worker_factory):
    w = worker_factory({"CAF_EVAL_BASELINE_DIR": "off"})
    r = w.evaluate("raises", task("return x @ torch.ones(3, 3)"), {}, mode="baseline", options=EAGER)
    v = r["verdict"]
    assert r["status"] == "ok" and "task_error" in v["flags"] and "reference raised" in v["task_error"]
    # a task whose output never changes is timed like any other (KernelBench's level2/80 is one)
    r = w.evaluate("const", task("return torch.zeros_like(x)"), {}, mode="baseline", options=EAGER)
    assert r["status"] == "ok" and "task_error" not in r["verdict"]["flags"], r["verdict"]
    assert r["verdict"]["timings"]["eager_ms"] > 0
    r = w.evaluate("relu", task("return torch.relu(x)"), {"model_new.py": "x = 1\n"}, mode="baseline",
                   options=EAGER)
    assert r["status"] == "infra_error" and "takes no files" in r["error"]


def test_judge_baselines_over_a_kernelbench_checkout(tmp_path, capsys):
    kb = tmp_path / "KernelBench" / "KernelBench"
    write(str(kb / "level1" / "1_relu.py"), task("return torch.relu(x)"))
    write(str(kb / "level1" / "2_constant.py"), task("return torch.zeros_like(x)"))
    write(str(kb / "level2" / "1_linear_gelu.py"), bundled("linear_bias_gelu"))
    write(str(kb / "level3" / "1_raises.py"), task("return x @ torch.ones(3, 3)"))
    write(str(kb / "level3" / "2_unparsable.py"), "class Model(:\n")
    out, md = tmp_path / "b.json", tmp_path / "b.md"
    rc = judge_baselines.main(["--tasks", str(tmp_path / "KernelBench"), "--levels", "1,3", "--slots", "2",
                               "--no-compile", "--time-budget-s", "0.1", "--min-iters", "5",
                               "--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--markdown", str(md)])
    assert rc == 0
    r = json.loads(out.read_text())
    rows = {x["name"]: x for x in r["rows"]}
    assert set(rows) == {"level1/1_relu", "level1/2_constant", "level3/1_raises", "2_unparsable.py"}
    assert rows["level1/1_relu"]["status"] == "measured" and rows["level1/1_relu"]["eager_ms"] > 0
    assert rows["level1/2_constant"]["status"] == "measured"  # judged: its output never changes
    assert rows["level3/1_raises"]["status"] == "task_error" and "reference raised" in rows["level3/1_raises"]["reason"]
    assert rows["2_unparsable.py"]["status"] == "refused"
    s = r["summary"]
    assert s["level1"]["tasks"] == 2 and s["level1"]["eager_measured"] == 2
    assert s["level3"]["not_measured"] == {"task_error": 1} and s["all"]["tasks"] == 4
    assert r["gpu"] == "cpu" and r["seconds"]["eager"] > 0
    text = md.read_text()
    assert "| level1 | 2 | 2 | 0 | 0 |" in text and "L3 level3/1_raises: task_error" in text


@pytest.mark.slow
def test_the_compile_pass_measures_torch_compile(tmp_path):
    d = tmp_path / "set"
    write(str(d / "relu.py"), task("return torch.relu(x)"))
    out = tmp_path / "b.json"
    assert judge_baselines.main(["--tasks", str(d), "--time-budget-s", "0.1", "--min-iters", "5",
                                 "--out", str(out)]) == 0
    row = json.loads(out.read_text())["rows"][0]
    assert row["status"] == "measured" and row["compile_ms"] > 0 and row["eager_ms"] > 0


def test_workers_that_do_not_start_end_the_run_with_a_clear_error(tmp_path, capsys):
    assert judge_baselines.worker_device("cuda") == "cuda:0" and judge_baselines.worker_device("cuda:3") == "cuda:3"
    d = tmp_path / "set"
    write(str(d / "relu.py"), task("return torch.relu(x)"))
    rc = judge_baselines.main(["--tasks", str(d), "--device", "cuda:7", "--memory-bytes", "1e9", "--no-compile",
                               "--out", str(tmp_path / "b.json")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "an eval worker did not start" in err and "no eval worker started" in err


def test_a_job_that_failed_beside_others_runs_again_alone():
    """An infrastructure error (out of memory beside other slots' jobs) or no verdict is
    retried once at the end of the pass, alone; a second failure keeps both reasons."""
    import threading
    from types import SimpleNamespace

    class Slot:
        def __init__(self):
            self.calls = {}
            self.lock = threading.Lock()

        def run(self, task, compile_):
            with self.lock:
                n = self.calls[task.name] = self.calls.get(task.name, 0) + 1
            if task.name == "oom" and n == 1:
                return {"status": "infra_error", "reason": "CUDA out of memory", "wall_s": 0.1}
            if task.name == "dies":
                return {"status": "no_verdict", "reason": f"worker died ({n})", "wall_s": 0.1}
            return {"status": "measured", "eager_ms": 1.0, "compile_ms": 0.5, "wall_s": 0.1}

    slots = [Slot(), Slot()]
    tasks = [SimpleNamespace(name=n) for n in ("ok", "oom", "dies")]
    rows = [{"name": t.name} for t in tasks]
    a = SimpleNamespace(fill=0.85, budget_s=60)
    judge_baselines.run_pass(slots, tasks, [1.0, 1.0, 1.0], rows, True, a, __import__("time").monotonic(), 0)
    ok, oom, dies = rows
    assert ok["status"] == "measured" and "retried_alone" not in ok["pass_compile"]
    assert oom["status"] == "measured" and oom["compile_ms"] == 0.5 and oom["pass_compile"]["retried_alone"]
    assert dies["status"] == "no_verdict" and "; alone: worker died" in dies["reason"]
    assert slots[0].calls.get("oom", 0) + slots[1].calls.get("oom", 0) == 2


def test_a_compile_job_the_stop_cut_short_is_counted_apart_from_failed_compiles():
    """A compile job still running when the run is stopped (the device call's time limit) is
    not a failure of torch.compile: the table counts it as stopped, and a failed compile as
    failed."""
    rows = [{"name": "a", "level": 3, "status": "measured", "eager_ms": 2.0, "compile_ms": 1.0},
            {"name": "b", "level": 3, "status": "measured", "eager_ms": 4.0,
             "compile_stopped": "the compile job was running when the run stopped: stopped by signal 15"},
            {"name": "c", "level": 3, "status": "measured", "eager_ms": 8.0, "compile_failed": "InductorError: x"}]
    s = judge_baselines.summarise(rows)["level3"]
    assert (s["compile_measured"], s["compile_failed"], s["compile_stopped"]) == (1, 1, 1)
    md = judge_baselines.markdown({"summary": {"level3": s}, "rows": rows})
    assert "| level3 | 3 | 3 | 1 | 1 | compile stopped 1 |" in md
    assert "- L3 b: eager only: the compile job was running when the run stopped" in md
    assert "- L3 c: eager only: InductorError: x" in md
