"""caf_agent_data.kernelbench_eval: the bundled tasks (skills/tasks) judged with real CPU eval
workers on the CPU replay's submissions (skills/replay/default.jsonl) plus a wrong one and a
missing one; the table checked against the verdicts, Markdown against JSON; a run killed
(SIGKILL) after its first verdict and run again; a policy's records; refused inputs."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from caf_agent_data import kernelbench_eval, kernelbench_inputs, kernelbench_table

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASKS = os.path.join(ROOT, "skills", "tasks")
CPU_REPLAY = os.path.join(ROOT, "skills", "replay", "default.jsonl")
# Rationale: short profiles (the 2-core machine); the verdicts' tiers are not what is tested.
FAST = json.dumps({"timing": {"budget_s": 0.3, "min_iters": 10, "max_iters": 60, "rel_ci": 0.05}})
# softmax judged with the add_relu kernel (its build is cached: same kernels/ content): wrong math
WRONG_MODEL_NEW = ("import torch.nn as nn\nimport caf_ext\n\n\nclass ModelNew(nn.Module):\n"
                   "    def forward(self, x):\n        return caf_ext.add_relu(x, x)\n")


def build_root() -> str:
    """The content-hashed kernel build cache the judge's tests share (safe: keyed by sources)."""
    return os.environ.get("CAF_EVAL_BUILD_ROOT") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "caf_agent", "eval_build")


def submissions(tmp) -> str:
    """The CPU replay's submissions, softmax replaced by a wrong one, layernorm removed."""
    subs = os.path.join(tmp, "subs")
    got = kernelbench_inputs.extract_replay(CPU_REPLAY, subs)
    assert sorted(got["written"]) == sorted(f[:-3] for f in os.listdir(TASKS) if f.endswith(".py"))
    shutil.rmtree(os.path.join(subs, "layernorm"))
    shutil.rmtree(os.path.join(subs, "softmax", "kernels"))
    shutil.copytree(os.path.join(subs, "add_relu", "kernels"), os.path.join(subs, "softmax", "kernels"))
    with open(os.path.join(subs, "softmax", "model_new.py"), "w") as f:
        f.write(WRONG_MODEL_NEW)
    return subs


def args(subs, out, workers=2):
    return ["--tasks", TASKS, "--submissions", subs, "--out", out, "--workers", str(workers),
            "--build-root", build_root(), "--options", FAST, "--job-timeout", "300"]


def results(out) -> list:
    with open(os.path.join(out, "results.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def wait_for_a_verdict(p, out) -> None:
    """Until results.jsonl holds a judged line (missing ones come first, without a job)."""
    path = os.path.join(out, "results.jsonl")
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and p.poll() is None:
        if os.path.exists(path) and any('"wall_s"' in x for x in open(path)):
            return
        time.sleep(0.1)
    raise AssertionError("the run ended (or took too long) before a verdict came in")


def check_report(out, n_problems):
    """The report's numbers recomputed from its rows, and the Markdown row equal to the JSON."""
    rep = json.load(open(os.path.join(out, "report.json")))
    rows = rep["rows"]
    assert sorted(r["key"] for r in rows) == sorted(f[:-3] for f in os.listdir(TASKS) if f.endswith(".py"))
    s = rep["overall"]
    assert s["problems"] == n_problems == len(rows) and rep["levels"]["tasks"] == s
    passed = [r for r in rows if r.get("correct")]
    assert s["passed"] == len(passed) and s["pass_rate"] == pytest.approx(len(passed) / n_problems)
    assert s["missing"] == sum(r["status"] == "missing" for r in rows)
    fe = [r for r in passed if r["speedup_eager"] > 1 / 0.95]
    assert s["faster_eager"] == len(fe) == sum(r["reward"] >= 2 for r in passed)
    md = open(os.path.join(out, "report.md")).read()
    for name, g in (("tasks", s), ("all", s)):
        assert "| " + " | ".join([name] + kernelbench_table.table_cells(g)) + " |" in md
    assert f"{100 * s['pass_rate']:.1f}% ({s['passed']}/{n_problems})" in md
    return rep


def test_bundled_tasks_judged_with_a_wrong_and_a_missing_submission(tmp_path, capsys):
    subs, out = submissions(str(tmp_path)), str(tmp_path / "out")
    assert kernelbench_eval.main(args(subs, out)) == 0
    err = capsys.readouterr().err
    rep = check_report(out, 6)
    by = {r["key"]: r for r in rep["rows"]}
    assert by["layernorm"]["status"] == "missing" and not by["layernorm"]["correct"]
    wrong = by["softmax"]
    assert wrong["status"] == "judged" and wrong["correct"] is False and wrong["reward"] == -1 and wrong["flags"]
    for k in ("add_relu", "fused_elementwise", "linear_bias_gelu", "row_sum"):
        r = by[k]
        assert r["correct"] is True and r["reward"] >= 1, r
        assert r["speedup_eager"] > 0 and r["eager_ms"] > 0 and r["compile_ms"] > 0 and r["candidate_ms"] > 0
        assert r["kernelbench_correct"] is True and r["submission_hash"] and r["task_hash"]
    s = rep["overall"]
    assert (s["passed"], s["missing"], s["evaluated"], s["task_errors"]) == (4, 1, 5, 0)
    assert s["kernelbench_passed"] == 4 and s["geomean_eager_n"] == 4
    assert s["mean_reward"] == pytest.approx(sum(kernelbench_table.row_reward(r) for r in rep["rows"]) / 6)
    assert "[6/6] tasks/" in err and "tasks/softmax: failed" in err and "eta" in err
    assert len(results(out)) == 6
    # a second run judges nothing; a broken line is named and skipped; --report-only agrees
    with open(os.path.join(out, "results.jsonl"), "a") as f:
        f.write('{"key": "torn\n')
    assert kernelbench_eval.main(args(subs, out)) == 0
    err = capsys.readouterr().err
    assert "resuming: 6 problems" in err and "results.jsonl:7: not JSON" in err and "judging" not in err
    before = json.load(open(os.path.join(out, "report.json")))["overall"]
    assert kernelbench_eval.main(["--report-only", "--out", out, "--tasks", TASKS]) == 0
    assert json.load(open(os.path.join(out, "report.json")))["overall"] == before


def test_a_run_killed_after_its_first_verdict_resumes_without_duplicates(tmp_path):
    subs, out = submissions(str(tmp_path)), str(tmp_path / "out")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "datasets"))
    cmd = [sys.executable, "-m", "caf_agent_data.kernelbench_eval"] + args(subs, out, workers=1)
    p = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for_a_verdict(p, out)
    os.killpg(p.pid, signal.SIGKILL)  # the tool and its workers
    p.wait()
    first = results(out)
    assert 1 <= len(first) < 6
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    keys = [x["key"] for x in results(out)]
    assert sorted(keys) == sorted(set(keys)) and len(keys) == 6  # every problem exactly once
    assert f"resuming: {len(first)} problems" in r.stderr
    rep = check_report(out, 6)
    assert all(x["status"] in ("judged", "missing") for x in rep["rows"])


def test_sigterm_stops_cleanly_with_a_nonzero_status(tmp_path):
    subs, out = submissions(str(tmp_path)), str(tmp_path / "out")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "datasets"))
    cmd = [sys.executable, "-m", "caf_agent_data.kernelbench_eval"] + args(subs, out, workers=1)
    p = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    wait_for_a_verdict(p, out)  # the next job is in flight
    p.send_signal(signal.SIGTERM)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == 128 + signal.SIGTERM and "Traceback" not in err and "stopped by SIGTERM" in err
    rep = json.load(open(os.path.join(out, "report.json")))
    assert rep["overall"]["problems"] == 6 and len(results(out)) < 6


def test_records_of_a_policy_evaluation(tmp_path, capsys):
    recs = [
        {"task_id": "add_relu", "reward": 3, "speedup_eager": 1.5, "speedup_compile": 1.2, "termination": "finished"},
        {"task_id": "softmax", "reward": -1, "speedup_eager": 0, "speedup_compile": 0, "termination": "turn_limit"},
        {"task_id": "row_sum", "reward": 0, "termination": "aborted", "abort_reason": "eval: task error: constant"},
        {"task_id": "layernorm", "reward": 0, "termination": "aborted", "abort_reason": "gpu pool lost"},
        {"task_id": "fused_elementwise", "reward": 1, "speedup_eager": 0.5, "speedup_compile": 0.25,
         "termination": "finished"},
    ]
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs[:2]) + "\nnot json\n"
                    + "\n".join(json.dumps(r) for r in recs[2:]) + "\n")
    out = str(tmp_path / "out")
    assert kernelbench_eval.main(["--records", str(path), "--tasks", TASKS, "--out", out]) == 0
    assert "records.jsonl:3: not JSON" in capsys.readouterr().err
    rep = json.load(open(os.path.join(out, "report.json")))
    s = rep["overall"]
    assert s["problems"] == 6 and s["missing"] == 1  # linear_bias_gelu: no record
    assert (s["passed"], s["evaluated"], s["task_errors"], s["no_verdict"]) == (2, 4, 1, 1)
    assert s["pass_rate"] == pytest.approx(2 / 6) and s["faster_eager"] == 1 and s["faster_compile"] == 1
    assert s["geomean_speedup_eager"] == pytest.approx((1.5 * 0.5) ** 0.5)
    assert s["geomean_speedup_compile"] == pytest.approx((1.2 * 0.25) ** 0.5)
    assert s["mean_reward"] == pytest.approx((3 - 1 - 1 - 1 + 1 - 1) / 6)
    assert s["kernelbench_pass_rate"] is None
    md = open(os.path.join(out, "report.md")).read()
    assert "| all | " + " | ".join(kernelbench_table.table_cells(s)) + " |" in md
    # KernelBench ids without a checkout: the level from the id
    path.write_text(json.dumps({"task_id": "level2/1_Conv", "reward": 2, "speedup_eager": 1.1,
                                "speedup_compile": 0.9, "termination": "finished"}) + "\n")
    assert kernelbench_eval.main(["--records", str(path), "--out", out]) == 0
    assert list(json.load(open(os.path.join(out, "report.json")))["levels"]) == ["level2"]


def test_refused_inputs_are_named(tmp_path, capsys):
    subs = tmp_path / "subs"
    (subs / "add_relu" / "kernels").mkdir(parents=True)
    (subs / "add_relu" / "model_new.py").write_text("x = 1\n")
    os.symlink("/etc/hostname", subs / "add_relu" / "kernels" / "k.cpp")
    os.symlink("/etc", subs / "softmax")
    (subs / "row_sum").mkdir()
    (subs / "row_sum" / "model_new.py").write_text("x = 1\n")
    (subs / "row_sum.py").write_text("x = 1\n")
    probs = {p.key: p for p in kernelbench_inputs.folder_problems(TASKS)}
    for key, words in (("add_relu", "kernels/k.cpp is a symbolic link"), ("softmax", "softmax is a symbolic link"),
                       ("row_sum", "both row_sum/ and row_sum.py")):
        with pytest.raises(kernelbench_inputs.SubmissionError, match=words):
            where = kernelbench_inputs.find_submission(str(subs), probs[key])
            kernelbench_inputs.read_submission(where)
    assert kernelbench_inputs.find_submission(str(subs), probs["layernorm"]) is None
    # a recording writing outside the workspace: refused, the rest extracted
    rec = tmp_path / "rec.jsonl"
    call = lambda path, text: ('<tool_call>\n' + json.dumps({"name": "Write", "arguments": {  # noqa: E731
        "file_path": path, "content": text}}) + '\n</tool_call>')
    rec.write_text(json.dumps({"task_id": "add_relu", "turns": [
        call("../../evil.py", "x"), call("model_new.py", "a"), call("./model_new.py", "b"),
        call("kernels/k.cpp", "k"), call("notes.md", "n")]}) + "\n"
        + json.dumps({"task_id": "../up", "turns": [call("model_new.py", "a")]}) + "\n{broken\n")
    warnings = []
    got = kernelbench_inputs.extract_replay(str(rec), str(tmp_path / "x"), warn=warnings.append)
    assert got == {"written": ["add_relu"], "skipped": ["../up"]}
    assert (tmp_path / "x" / "add_relu" / "model_new.py").read_text() == "b"
    assert sorted(os.listdir(tmp_path / "x" / "add_relu")) == ["kernels", "model_new.py"]
    assert not (tmp_path / "evil.py").exists()
    text = "\n".join(warnings)
    assert "leaves the workspace" in text and "not a clean relative name" in text and "rec.jsonl:3" in text
    # whole inputs: each named, exit status 2
    for argv, words in ((["--tasks", str(tmp_path / "none"), "--submissions", str(subs)], "is not a folder"),
                        (["--kernelbench", str(tmp_path), "--submissions", str(subs)], "holds no level1/"),
                        (["--tasks", TASKS, "--submissions", str(subs), "--options", "{\"nope\": 1}"], "unknown option"),
                        (["--tasks", TASKS, "--submissions", str(tmp_path / "none")], "is not a folder"),
                        (["--report-only"], "does not exist")):
        assert kernelbench_eval.main(argv + ["--out", str(tmp_path / "o")]) == 2
        assert words in capsys.readouterr().err
    with pytest.raises(kernelbench_inputs.InputError, match="'1:x' is not LEVEL:N"):
        kernelbench_inputs.parse_select("1:x")
