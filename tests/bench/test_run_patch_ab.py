"""bench/policy/run_patch_ab.sh's gate (CPU): GATE_REPEAT runs the gate N times a side, GATE_A gates
the tree before any patch, a failing run stops the call with the patch taken out again (GATE_SOFT=1
goes on). The script runs in a copy of what it needs inside a scratch git repository, with a
stand-in for Python that fakes the build and pytest: the real ones need a GPU machine."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from stand_in_tool import stand_in  # tests/bench, on pytest's path

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The stand-in for $PY: the build writes a tool (and its call's prebuilt= argument to builds.txt), env.txt's torch line is a stand-in's (importing
# torch takes seconds), pytest counts its runs in gate-runs.txt and fails when the tree's f.txt
# holds $FAIL_WHEN; anything else is the real Python.
STAND_IN = f"""if [ "$1" = -c ] && [[ $2 == *build_tool* ]]; then
  echo "${{2##*prebuilt=}}" >> builds.txt
  mkdir -p "$BUILD/policy/model" && printf '#!/bin/sh\\n' > "$BUILD/policy/model/policy_model_tool" &&
    chmod +x "$BUILD/policy/model/policy_model_tool"; exit 0
fi
if [ "$1" = -c ] && [[ $2 == *"import torch"* ]]; then echo "torch: stand-in"; exit 0; fi
if [ "$1" = -m ] && [ "$2" = pytest ]; then
  echo "$(cat f.txt)" >> gate-runs.txt
  echo "$(cat f.txt) ${{*: -1}}" >> gate-args.txt
  [ -n "${{FAIL_WHEN:-}}" ] && grep -qx "$FAIL_WHEN" f.txt && {{ echo "1 failed"; exit 1; }}
  echo "1 passed"; exit 0
fi
exec {sys.executable} "$@"
"""


def scratch_tree(tmp_path):
    """A git repository with the script, what it sources and runs, f.txt ("x") and p.patch (x -> y)."""
    tree = tmp_path / "tree"
    (tree / "bench/policy").mkdir(parents=True)
    for name in ("run_patch_ab.sh", "device_env.sh", "summarize.py"):
        shutil.copy(ROOT / "bench/policy" / name, tree / "bench/policy" / name)
    (tree / "f.txt").write_text("x\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=tree, check=True)
    subprocess.run([*git, "add", "."], cwd=tree, check=True)
    subprocess.run([*git, "commit", "-qm", "t"], cwd=tree, check=True)
    (tree / "f.txt").write_text("y\n")
    patch = subprocess.run(["git", "diff"], cwd=tree, check=True, capture_output=True, text=True).stdout
    (tree / "f.txt").write_text("x\n")
    (tree / "p.patch").write_text(patch)
    return tree, stand_in(tmp_path, STAND_IN, name="py", shell="/bin/bash")


def run(tmp_path, **env):
    tree, py = scratch_tree(tmp_path)
    full = dict(os.environ, PY=str(py), OUT=str(tmp_path / "out"), BUILD=str(tmp_path / "build"), PATCH="p.patch",
                RUNS="")
    full.update({"GATE": "tests/some_gpu_test.py", **env})
    proc = subprocess.run(["bash", "bench/policy/run_patch_ab.sh"], cwd=tree, env=full, capture_output=True,
                          text=True, timeout=120)
    runs = (tree / "gate-runs.txt").read_text().split() if (tree / "gate-runs.txt").exists() else []
    return proc, runs, (tree / "f.txt").read_text(), tmp_path / "out"


def test_the_gate_runs_n_times_on_each_side_and_on_a_first(tmp_path):
    proc, runs, f, out = run(tmp_path, GATE_REPEAT="3", GATE_A="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert runs == ["x"] * 3 + ["y"] * 3  # A's tree three times, then the patched tree's
    assert sorted(p.name for p in out.glob("gate-tests-*")) == [
        f"gate-tests-{side}-r{r}.log" for side in ("a", "b") for r in (1, 2, 3)]
    assert f == "x\n"  # the patch taken out again


def test_without_gate_a_only_the_patch_is_gated_once(tmp_path):
    proc, runs, _, out = run(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert runs == ["y"] and (out / "gate-tests-b.log").exists()


def test_a_failing_run_stops_the_call_after_its_side_and_takes_the_patch_out(tmp_path):
    proc, runs, f, _ = run(tmp_path, GATE_REPEAT="2", FAIL_WHEN="y")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert runs == ["y", "y"]  # every run of the side, then the stop
    assert "gate tests (b, run 2 of 2) rc=1" in proc.stdout
    assert f == "x\n"


def test_a_failing_run_on_a_stops_before_any_patch(tmp_path):
    proc, runs, f, _ = run(tmp_path, GATE_A="1", FAIL_WHEN="x")
    assert proc.returncode == 1 and runs == ["x"] and f == "x\n"


def test_gate_soft_goes_on_past_a_failure(tmp_path):
    proc, runs, f, _ = run(tmp_path, GATE_A="1", GATE_SOFT="1", FAIL_WHEN="x")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert runs == ["x", "y"] and f == "x\n"


@pytest.mark.parametrize("repeat", ["0", "two"])
def test_a_repeat_that_is_not_a_count_is_named(tmp_path, repeat):
    proc, runs, _, _ = run(tmp_path, GATE_REPEAT=repeat)
    assert proc.returncode == 2 and runs == []
    assert f"GATE_REPEAT must be a whole number >= 1, not '{repeat}'" in proc.stdout


def test_every_side_is_offered_the_whole_prebuilt_folder(tmp_path):
    """A side's tool is picked by its stamp (bench/policy/prebuilt.py install), not by the side's
    name: each build step gets PREBUILT itself, not PREBUILT/sides/<side>."""
    proc, runs, _, _ = run(tmp_path, PREBUILT="pb")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    builds = (tmp_path / "tree/builds.txt").read_text().splitlines()
    assert builds == ["'pb' or None)"] * 2, builds  # A's build, then side b's


def test_a_sides_own_gate_replaces_gate_there(tmp_path):
    """GATE_<side> gives that side its own tests (a patch's, which the tree lacks): a runs GATE_a, b
    the shared GATE; with GATE empty and only GATE_b set, only b is gated."""
    proc, runs, _, _ = run(tmp_path, GATE_A="1", GATE="tests/shared.py", GATE_a="tests/tree_only.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    args = (tmp_path / "tree" / "gate-args.txt").read_text().splitlines()
    assert args == ["x tests/tree_only.py", "y tests/shared.py"], args
    (tmp_path / "tree").rename(tmp_path / "first")
    proc, runs, _, _ = run(tmp_path, GATE="", GATE_b="tests/patch_only.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "tree" / "gate-args.txt").read_text().splitlines() == ["y tests/patch_only.py"]
