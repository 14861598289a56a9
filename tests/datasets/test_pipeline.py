"""The pipeline command end to end, and the bundled sample it produced."""
import json
import os

from caf_agent_data import pipeline
from caf_agent_data.decontam import DEFAULT_THRESHOLD, build_index, nearest
from caf_agent_data.identity import task_identity
from caf_agent_data.readers import read_task_set
from data_helpers import ROOT, TASKS, bundled, task, write

SAMPLE = os.path.join(ROOT, "datasets", "sample")


def test_pipeline_filters_and_decontaminates_a_task_set(tmp_path, capsys):
    src = tmp_path / "in"
    write(str(src / "near_copy.py"), bundled("softmax").replace("batch_size", "rows").replace("4096", "2048"))
    write(str(src / "constant.py"), task("return torch.zeros_like(x)"))
    write(str(src / "good.py"), task("return torch.nn.functional.hardswish(x) * 3.0"))
    write(str(src / "dup.py"), task("return torch.nn.functional.hardswish(x) * 3.0", doc='"""Same task."""\n'))
    write(str(src / "broken.py"), "class Model(:\n")
    out = tmp_path / "out"
    rc = pipeline.main(["--out", str(out), "--seed", "1", "--count", "5", "--from", str(src),
                        "--eval-set", TASKS, "--slots", "1", "--min-ms", "0", "--max-ms", "10000"])
    assert rc == 1   # fewer kept than --count: every candidate was seen
    report = json.loads((out / "report.json").read_text())
    assert report["kept"] == 1
    assert report["dropped"] == {"decontaminated": 1, "reference": 1, "duplicate": 1, "read": 1}
    assert report["decontaminated"][0]["nearest"].endswith("softmax.py")
    assert report["similarity"]["count"] == 3 and report["similarity"]["max"] > DEFAULT_THRESHOLD
    ts = read_task_set(str(out))
    assert [t.name for t in ts.tasks] == ["dup"] or [t.name for t in ts.tasks] == ["good"]
    rec = ts.tasks[0].meta
    assert rec["times"]["cpu"]["eager_ms"] > 0 and rec["input_shapes"] == [[8, 64]]
    assert "kept 1 of 5 candidates" in capsys.readouterr().out
    # a second run into the same directory needs --force
    try:
        pipeline.main(["--out", str(out), "--count", "1", "--from", str(src)])
        raise AssertionError("expected a refusal")
    except SystemExit as e:
        assert "--force" in str(e)


def test_bundled_sample_matches_its_manifest_and_is_decontaminated():
    ts = read_task_set(SAMPLE)
    assert ts.kind == "manifest" and not ts.refused
    assert len(ts.tasks) >= 50
    py = sorted(f for f in os.listdir(SAMPLE) if f.endswith(".py"))
    assert py == sorted(t.meta["file"] for t in ts.tasks)
    ix = build_index([(t.name, t.source) for t in read_task_set(TASKS).tasks])
    for t in ts.tasks:
        assert t.identity == t.meta["identity"] == task_identity(t.source)
        assert t.meta["times"]["cpu"]["eager_ms"] > 0 and t.meta["ops"]
        assert nearest(t.source, ix)[0] <= DEFAULT_THRESHOLD
    levels = {t.level for t in ts.tasks}
    assert levels == {1, 2}
    header = open(os.path.join(SAMPLE, "manifest.jsonl")).readline()
    assert '"seed": 0' in header and "--count" in header


def test_the_judge_on_a_gpu_pool_slot_accepts_and_refuses_with_reasons(tmp_path):
    from caf_agent_data.pool_filter import DEFAULT_BINARY, judge_through_pool
    from cafagent_testlib import require_binary
    import pathlib
    require_binary(pathlib.Path(DEFAULT_BINARY))
    res = judge_through_pool([("good", task("return torch.relu(x) * 2.0")),
                              ("raises", task("return x @ torch.ones(3, 3)")),
                              ("no_module", "import no_such_module\n" + task("return x"))], slots=2)
    v = res["verdicts"]
    assert v["good"]["accepted"], v["good"]
    assert not v["raises"]["accepted"] and v["raises"]["stage"] == "judge"
    assert "the task's reference raised" in v["raises"]["reason"]
    assert not v["no_module"]["accepted"] and "no_such_module" in v["no_module"]["reason"]


def test_pipeline_with_the_judge_pool_stage(tmp_path):
    import pathlib
    from caf_agent_data.pool_filter import DEFAULT_BINARY
    from cafagent_testlib import require_binary
    require_binary(pathlib.Path(DEFAULT_BINARY))
    src = tmp_path / "in"
    write(str(src / "good.py"), task("return torch.nn.functional.hardswish(x) * 3.0"))
    out = tmp_path / "out"
    rc = pipeline.main(["--out", str(out), "--count", "1", "--from", str(src), "--slots", "1",
                        "--min-ms", "0", "--max-ms", "10000", "--judge-pool"])
    report = json.loads((out / "report.json").read_text())
    assert rc == 0 and report["kept"] == 1
    assert report["judge_pool"]["tasks"] == 1 and report["judge_pool"]["accepted"] == 1


def test_sigterm_stops_the_run_and_writes_what_was_kept(tmp_path):
    import signal
    import subprocess
    import sys
    import time
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "datasets"))
    p = subprocess.Popen([sys.executable, "-m", "caf_agent_data.pipeline", "--out", str(out), "--count", "500",
                          "--slots", "1", "--no-transformers", "--min-ms", "0", "--max-ms", "10000"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    for line in p.stderr:
        if "filter:" in line or time.time() > deadline:
            break
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    # what says where a signal went (a raise dropped in a finalizer prints "Exception ignored")
    clues = [ln for ln in err.splitlines() if "Exception" in ln or "Traceback" in ln or "signal" in ln]
    assert p.returncode == 2, "\n".join(clues[:20]) + "\n...\n" + err[-1500:]
    report = json.loads((out / "report.json").read_text())
    assert "stopped by signal" in report["aborted"]
    assert 0 < report["kept"] < 500
    assert len([f for f in os.listdir(out) if f.endswith(".py")]) == report["kept"]
