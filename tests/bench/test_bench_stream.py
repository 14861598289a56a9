"""bench/policy/bench_stream.cu: it builds with nvcc, refuses bad arguments by name, and says what
is wrong where there is no GPU (CPU); on a GPU every way of copying reads the same bytes (the same
checksum) and the table has a row for each (gpu)."""
import re

import pytest
from standalone_cuda import assert_fails_without_a_gpu, assert_refused, build, run  # tests/bench, on pytest's path


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    return build(tmp_path_factory, "bench_stream.cu", "-std=c++17", "-O3", "-arch=sm_90a")


@pytest.mark.parametrize("args, says", [
    (["--mb-each"], "unknown or incomplete argument '--mb-each'"),
    (["--blocks", "4", "--speed"], "unknown or incomplete argument '--speed'"),
    (["--mb-each", "4"], "--mb-each >= 8"),
    (["--reps", "0"], "--reps >= 1"),
])
def test_bad_arguments_are_refused_by_name(binary, args, says):
    assert_refused(binary, args, says)


def test_without_a_gpu_it_says_what_failed(binary):
    assert_fails_without_a_gpu(binary, "--mb-each", 8, "--reps", 1)


@pytest.mark.gpu
def test_every_way_reads_the_same_bytes(binary):
    proc = run(binary, "--mb-each", 8, "--reps", 1)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if re.match(r"\| (async16|bulk|regs)", line)]
    assert len(rows) == 12, proc.stdout
    sums = {line.rstrip(" |").rsplit("| ", 1)[1] for line in rows}
    assert len(sums) == 1, proc.stdout
