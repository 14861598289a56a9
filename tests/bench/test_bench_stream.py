"""bench/policy/bench_stream.cu: it builds with nvcc, refuses bad arguments by name, and says what
is wrong where there is no GPU (CPU); on a GPU every way of copying reads the same bytes (the same
checksum) and the table has a row for each (gpu)."""
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE = ROOT / "bench/policy/bench_stream.cu"


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path_factory.mktemp("bench_stream") / "bench_stream"
    done = subprocess.run([nvcc, "-std=c++17", "-O3", "-arch=sm_90a", "-o", str(out), str(SOURCE)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return out


def run(binary, *args):
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("args, says", [
    (["--mb-each"], "unknown or incomplete argument '--mb-each'"),
    (["--blocks", "4", "--speed"], "unknown or incomplete argument '--speed'"),
    (["--mb-each", "4"], "--mb-each >= 8"),
    (["--reps", "0"], "--reps >= 1"),
])
def test_bad_arguments_are_refused_by_name(binary, args, says):
    proc = run(binary, *args)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


def test_without_a_gpu_it_says_what_failed(binary):
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        pytest.skip("a GPU is here: the gpu test below runs instead")
    proc = run(binary, "--mb-each", 8, "--reps", 1)
    assert proc.returncode == 1 and proc.stderr.startswith("bench_stream: cudaGetDeviceProperties"), proc.stderr


@pytest.mark.gpu
def test_every_way_reads_the_same_bytes(binary):
    proc = run(binary, "--mb-each", 8, "--reps", 1)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if re.match(r"\| (async16|bulk|regs)", line)]
    assert len(rows) == 12, proc.stdout
    sums = {line.rstrip(" |").rsplit("| ", 1)[1] for line in rows}
    assert len(sums) == 1, proc.stdout
