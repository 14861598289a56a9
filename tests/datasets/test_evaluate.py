"""Per-level evaluation of a task set (a small KernelBench-shaped checkout): measured tasks,
refusals with their reasons, the table."""
import json

from caf_agent_data import evaluate
from data_helpers import bundled, task, write


def test_per_level_report_of_a_kernelbench_checkout(tmp_path, capsys):
    kb = tmp_path / "KernelBench" / "KernelBench"
    write(str(kb / "level1" / "1_relu.py"), task("return torch.relu(x)"))
    write(str(kb / "level1" / "2_noisy.py"), task("return x + torch.randn_like(x) * 1e-3"))
    write(str(kb / "level2" / "1_linear_gelu.py"), bundled("linear_bias_gelu"))
    write(str(kb / "level3" / "1_constant.py"), task("return torch.zeros_like(x)"))
    write(str(kb / "level3" / "2_no_module.py"), "import no_such_module\n" + task("return x"))
    write(str(kb / "level3" / "3_unparsable.py"), "class Model(:\n")
    out = tmp_path / "r.json"
    rc = evaluate.main(["--tasks", str(tmp_path / "KernelBench"), "--levels", "1,3", "--slots", "2", "--serial-timing",
                        "--timeout-s", "60", "--out", str(out)])
    assert rc == 0
    r = json.loads(out.read_text())
    rows = {x["name"]: x for x in r["rows"]}
    assert set(rows) == {"level1/1_relu", "level1/2_noisy", "level3/1_constant", "level3/2_no_module"}
    assert rows["level1/1_relu"]["eager_ms"] > 0 and rows["level1/1_relu"]["level"] == 1
    # nondeterministic: measured and noted, not refused
    assert rows["level1/2_noisy"]["eager_ms"] > 0 and "not deterministic" in rows["level1/2_noisy"]["notes"][0]
    assert rows["level3/1_constant"]["stage"] == "reference" and "does not depend" in rows["level3/1_constant"]["reason"]
    assert rows["level3/2_no_module"]["stage"] == "load" and "no_such_module" in rows["level3/2_no_module"]["reason"]
    assert r["reader_refused"][0]["where"].endswith("3_unparsable.py")
    lv = r["levels"]
    assert lv["1"]["tasks"] == 2 and lv["1"]["eager_measured"] == 2 and lv["1"]["nondeterministic"] == 1
    assert lv["3"]["refused"] == {"reference": 1, "load": 1} and lv["all"]["tasks"] == 4
    md = capsys.readouterr().out
    assert "| 1 | 2 | 2 | 0 | 0 |" in md and "`level3/1_constant`: reference:" in md


def test_a_task_too_large_for_its_share_is_run_alone(tmp_path):
    d = tmp_path / "set"
    write(str(d / "relu.py"), task("return torch.relu(x)"))
    out = tmp_path / "r.json"
    assert evaluate.main(["--tasks", str(d), "--slots", "2", "--memory-share", "1e-12", "--out", str(out)]) == 0
    row = json.loads(out.read_text())["rows"][0]
    assert row["stage"] == "measured" and row["eager_ms"] > 0
    assert "run alone on the device after: task too large for this slot" in row["notes"][0]
