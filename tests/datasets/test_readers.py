"""Readers of task sets and the task identity."""
import json
import os

import pytest

from caf_agent_data.identity import task_identity
from caf_agent_data.manifest import write_manifest
from caf_agent_data.readers import (TaskSetError, merge, read_directory, read_kernelbench, read_manifest,
                                    read_parquet, read_task_set)
from data_helpers import TASKS, bundled, task, write

RELU = task("return torch.relu(x)")


def test_identity_ignores_comments_docstrings_and_layout():
    other = RELU.replace('"""Level 1: test."""', '"""Another docstring."""').replace(
        "return torch.relu(x)", "return torch.relu(  x )  # a comment")
    assert task_identity(other) == task_identity(RELU)
    assert task_identity(RELU.replace("dim = 64", "dim = 65")) != task_identity(RELU)
    with pytest.raises(SyntaxError):
        task_identity("def (:")


def test_directory_reads_tasks_and_refuses_bad_files(tmp_path):
    write(str(tmp_path / "a_relu.py"), RELU)
    write(str(tmp_path / "b_broken.py"), "class Model(:\n")
    write(str(tmp_path / "c_no_inputs.py"), "import torch\nclass Model: pass\ndef get_init_inputs(): return []\n")
    write(str(tmp_path / "_private.py"), RELU)
    write(str(tmp_path / "notes.txt"), "not a task")
    ts = read_directory(str(tmp_path))
    assert [t.name for t in ts.tasks] == ["a_relu"]
    assert ts.tasks[0].level == 1
    reasons = dict((os.path.basename(w), r) for w, r in ts.refused)
    assert "does not parse" in reasons["b_broken.py"]
    assert "`get_inputs`" in reasons["c_no_inputs.py"]
    with pytest.raises(TaskSetError, match="does not exist"):
        read_directory(str(tmp_path / "missing"))


def test_bundled_tasks_read_as_a_directory():
    ts = read_task_set(TASKS)
    assert ts.kind == "directory" and len(ts.tasks) == 6 and not ts.refused
    assert {t.name: t.level for t in ts.tasks}["linear_bias_gelu"] == 2


def test_kernelbench_checkout_records_the_folder_level(tmp_path):
    kb = tmp_path / "KernelBench" / "KernelBench"
    write(str(kb / "level1" / "19_ReLU.py"), RELU.replace('"""Level 1: test."""\n', ""))
    write(str(kb / "level2" / "1_Softmax.py"), bundled("softmax"))
    write(str(kb / "level3" / "1_Bad.py"), "x = (")
    ts = read_task_set(str(tmp_path / "KernelBench"))
    assert ts.kind == "kernelbench"
    assert {t.name: t.level for t in ts.tasks} == {"level1/19_ReLU": 1, "level2/1_Softmax": 2}
    assert len(ts.refused) == 1 and "level3" in ts.refused[0][0]
    assert [t.name for t in read_kernelbench(str(kb), levels=(2,)).tasks] == ["level2/1_Softmax"]
    with pytest.raises(TaskSetError, match="not a KernelBench checkout"):
        read_kernelbench(str(tmp_path))


def test_manifest_with_files_and_inline_code(tmp_path):
    write(str(tmp_path / "relu.py"), RELU)
    write_manifest(str(tmp_path / "manifest.jsonl"), {"seed": 3}, [
        {"name": "relu", "file": "relu.py", "level": 1, "ops": ["torch.relu"]},
        {"name": "inline", "code": bundled("row_sum")},
        {"name": "neither"},
        {"name": "gone", "file": "missing.py"},
    ])
    with open(tmp_path / "manifest.jsonl", "a") as f:
        f.write("{not json\n")
    ts = read_manifest(str(tmp_path / "manifest.jsonl"))
    assert [t.name for t in ts.tasks] == ["relu", "inline"]
    assert ts.tasks[0].meta["ops"] == ["torch.relu"]
    reasons = " | ".join(r for _, r in ts.refused)
    assert "neither `file` nor `code`" in reasons and "cannot be read" in reasons and "not JSON" in reasons
    # a directory holding a manifest is read through it
    assert read_task_set(str(tmp_path)).kind == "manifest"


def test_manifest_version_and_header_checked(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text(json.dumps({"format": "caf_agent_tasks", "version": 99}) + "\n")
    with pytest.raises(TaskSetError, match="version 99"):
        read_manifest(str(p))
    p.write_text(json.dumps({"name": "x"}) + "\n")
    with pytest.raises(TaskSetError, match="header"):
        read_manifest(str(p))


def _parquet(path, columns: dict):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install pyarrow)")
    import pyarrow.parquet as pq
    pq.write_table(pa.table(columns), str(path))


def test_parquet_ops6k_table(tmp_path):
    p = tmp_path / "ops.parquet"
    _parquet(p, {"ops": ['["nn.ReLU"]', "nn.Softmax, torch.sum"], "data_source": ["torch", "torch"],
                 "code": [RELU, "def broken(:"]})
    ts = read_parquet(str(p))
    assert len(ts.tasks) == 1 and ts.tasks[0].meta == {"ops": ["nn.ReLU"], "data_source": "torch"}
    assert ts.refused[0][0].endswith("#1") and "does not parse" in ts.refused[0][1]
    # the same task from the parquet table and from a directory is one task
    write(str(tmp_path / "d" / "relu.py"), RELU)
    merged = merge([ts, read_task_set(str(tmp_path / "d"))])
    assert len(merged.tasks) == 1 and merged.tasks[0].meta["also_in"]


def test_parquet_with_other_columns_is_refused(tmp_path):
    p = tmp_path / "other.parquet"
    _parquet(p, {"ops": ["x"], "code": [RELU], "answer": ["y"]})
    with pytest.raises(TaskSetError, match=r"extra: \['answer'\], missing: \['data_source'\]"):
        read_task_set(str(p))
