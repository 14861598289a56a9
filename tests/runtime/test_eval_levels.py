"""`caf-agent --role local --eval --tasks KERNELBENCH --levels ...`: a KernelBench-shaped checkout
as the task set (level folders, ids level<N>/<name>), the per-level Table 1 report with the
device, and `--baselines`: every task's reference timed by the judge on the pool's slots
(baseline jobs), refusals with the judge's reasons. Bad --levels / --baselines use is named."""
import json
import os
import re
import subprocess
import sys

from cafagent_testlib import REPO, records_in, store_of
from test_local_job import local_config

sys.path.insert(0, str(REPO / "tests" / "datasets"))
from data_helpers import bundled, task, write  # noqa: E402


def checkout(tmp_path):
    kb = tmp_path / "KernelBench" / "KernelBench"
    write(str(kb / "level1" / "1_relu.py"), task("return torch.relu(x)"))
    write(str(kb / "level1" / "2_constant.py"), task("return torch.zeros_like(x)"))
    write(str(kb / "level2" / "1_linear_gelu.py"), bundled("linear_bias_gelu"))
    write(str(kb / "level3" / "1_raises.py"), task("return x @ torch.ones(3, 3)"))
    write(str(kb / "level3" / "2_no_model.py"), "x = 1\n")
    return tmp_path / "KernelBench"


def config(tmp_path, ws):
    cfg = local_config(tmp_path, ws)
    replay = tmp_path / "replay.jsonl"
    replay.write_text(json.dumps({"task_id": "*", "turns": ["No changes."]}) + "\n")
    cfg.write_text(cfg.read_text().replace("[gpu_pool]\n", "[gpu_pool]\nslots = 2\n")
                   + f'replay_path = "{replay}"\n')
    return cfg


def test_eval_over_levels_of_a_kernelbench_checkout(caf_agent, tmp_path, workspace_root):
    kb = checkout(tmp_path)
    res = subprocess.run([str(caf_agent), "--role", "local", "--eval", "--config", str(config(tmp_path, workspace_root)),
                          "--tasks", str(kb), "--levels", "1,2"], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    records = records_in(store_of(res.stdout))
    assert sorted(r["task_id"] for r in records) == ["level1/1_relu", "level1/2_constant", "level2/1_linear_gelu"]
    # level, episodes, aborted (none: the constant task is judged too), ...
    assert re.search(r"^L1\s+2\s+0\s", res.stdout, re.M), res.stdout
    assert re.search(r"^L2\s+1\s+0\s", res.stdout, re.M) and not re.search(r"^L3", res.stdout, re.M), res.stdout
    assert "evaluated on: gpu_pool device cpu, 2 slot(s)" in res.stdout
    by_task = {r["task_id"]: r for r in records}
    # the starting files are no kernel: judged, reward -1; the task whose output never changes
    # is judged as well, and never correct (a constant is its answer)
    assert by_task["level1/1_relu"]["reward"] == -1 and by_task["level1/1_relu"]["termination"] != "aborted"
    assert by_task["level1/2_constant"]["reward"] == -1
    assert by_task["level1/2_constant"]["termination"] != "aborted"


def test_baselines_through_the_pool(caf_agent, tmp_path, workspace_root):
    kb = checkout(tmp_path)
    res = subprocess.run([str(caf_agent), "--role", "local", "--eval", "--baselines", "--config",
                          str(config(tmp_path, workspace_root)), "--tasks", str(kb), "--levels", "1,3"],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    assert "baselines measured by the judge on cpu" in out, out
    assert re.search(r"^L1\s+2\s+2\s+2\s", out, re.M), out  # 2 tasks, eager 2, compile 2
    assert re.search(r"^L3\s+1\s+0\s+0\s", out, re.M), out
    assert "level3/1_raises: task_error: task error: the task's reference raised" in out
    assert "2_no_model.py: rejected: not read: has no `class Model`" in out
    path = re.search(r"every row in (\S+\.json)", out).group(1)
    doc = json.loads(open(path).read())
    rows = {r["task_id"]: r for r in doc["rows"]}
    assert rows["level1/1_relu"]["eager_ms"] > 0 and rows["level1/1_relu"]["compile_ms"] > 0
    assert rows["level1/1_relu"]["slot"].startswith("slot")
    assert doc["device"] == "cpu" and doc["levels"]["1"]["tasks"] == 2
    # the judge's one cache: the baselines are on disk under the slots' build root
    assert list((tmp_path / "run" / "eval-build" / "baselines").glob("baseline-*.json"))


def test_bad_levels_and_baselines_use_are_named(caf_agent, tmp_path, workspace_root):
    kb = checkout(tmp_path)
    cfg = str(config(tmp_path, workspace_root))
    for args, text in [(["--eval", "--levels", "1,x"], "--levels '1,x': 'x' is not a level number"),
                       (["--eval", "--tasks", str(kb), "--levels", "7"], "(levels found: 1,2,3)"),
                       (["--baselines"], "--baselines is for the local role with --eval")]:
        res = subprocess.run([str(caf_agent), "--role", "local", "--config", cfg, *args],
                             capture_output=True, text=True, timeout=120, cwd=REPO)
        assert res.returncode == 2 and text in res.stderr, (args, res.stderr[-1500:])
