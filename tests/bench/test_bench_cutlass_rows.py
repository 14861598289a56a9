"""bench/policy/bench_cutlass_rows.cu: it builds with nvcc for sm_90a against CUTLASS 4.2's headers
(fetched once from PyPI by bench/policy/build_cutlass_rows.sh, the GDC flag on, so the stream-K
scheduler of its own compiles), refuses bad arguments by name, and says what is wrong where there
is no GPU (CPU); on a GPU every form agrees with the float reference and its chain with cuBLAS's,
and the tables have a row for each projection and each form (gpu)."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from standalone_cuda import ROOT, assert_fails_without_a_gpu, assert_refused, run  # tests/bench, on pytest's path


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path_factory.mktemp("bench_cutlass_rows") / "bench_cutlass_rows"
    cache = pathlib.Path(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))) / "caf_agent" / "cutlass-4.2.0.0"
    env = dict(os.environ, OUT=str(out), CUTLASS_CACHE=str(cache), PYTHON=sys.executable)
    done = subprocess.run(["bash", str(ROOT / "bench/policy/build_cutlass_rows.sh")], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.mark.parametrize("args, says", [
    (["--layers"], "--layers: needs a value"),
    (["--reps", "2", "--fast"], "--fast: unknown option"),
    (["--rows", "65"], "--rows: is 1 to 64"),
    (["--layers", "0"], "--layers: is 1 to 64"),
    (["--reps", "0"], "--reps: is at least 1"),
    (["--splits", "4,4,1"], "--splits: takes four counts: qkv,o,gate_up,down"),
    (["--splits", "4,4,1,17"], "--splits: each count is 1 to 16"),
    (["--reduction", "atomic"], "--reduction: is det or nondet"),
    (["--kernel", "simt"], "--kernel: is coop, ping or both"),
])
def test_bad_arguments_are_refused_by_name(binary, args, says):
    assert_refused(binary, args, says)


def test_without_a_gpu_it_says_what_failed(binary):
    assert_fails_without_a_gpu(binary, "--reps", 1)


@pytest.mark.gpu
@pytest.mark.parametrize("args", [[], ["--splits", "1,1,1,1"], ["--reduction", "nondet", "--rows", "33"]])
def test_every_form_agrees_and_is_timed(binary, args):
    proc = run(binary, "--reps", 2, "--layers", 4, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = [line for line in proc.stdout.splitlines() if line.startswith("check ")]
    assert len(checks) == 2 * 4 * 3, proc.stdout  # 2 row counts x 4 shapes x (cuBLAS, coop, ping)
    alone = [line for line in proc.stdout.splitlines() if re.match(r"\| (qkv|o|gate_up|down) \|", line)]
    assert len(alone) == 4 and all(line.count("|") == 2 + 5 + 1 for line in alone), proc.stdout
    chains = [line for line in proc.stdout.splitlines() if re.match(r"\| (cuBLAS|CUTLASS)", line)]
    assert len(chains) == 5, proc.stdout
