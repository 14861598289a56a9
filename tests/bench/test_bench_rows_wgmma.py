"""bench/policy/bench_rows_wgmma.cu: it builds with nvcc for sm_90a (wgmma, tensor copies), refuses bad
arguments by name, and says what is wrong where there is no GPU (CPU); on a GPU every launch of the
wgmma kernel (each tile width, ring depth and number of shares; plain, with a bias, with the SwiGLU
epilogue) and cuBLAS's agree with the float reference at 1, 7, 33 and 64 rows, and the table has a row
for each (gpu)."""
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE = ROOT / "bench/policy/bench_rows_wgmma.cu"


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    toolkit = pathlib.Path(nvcc).resolve().parents[1]
    if not any(toolkit.glob("lib64/libcublas.so*")) and not any(toolkit.glob("targets/*/lib/libcublas.so*")):
        pytest.skip(f"no libcublas beside {nvcc}")
    out = tmp_path_factory.mktemp("bench_rows_wgmma") / "bench_rows_wgmma"
    done = subprocess.run([nvcc, "-std=c++17", "-O3", "-gencode", "arch=compute_90a,code=sm_90a", "-o", str(out),
                           str(SOURCE), "-lcublas"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return out


def run(binary, *args):
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("args, says", [
    (["--rows"], "unknown or incomplete argument '--rows'"),
    (["--reps", "2", "--fast"], "unknown or incomplete argument '--fast'"),
    (["--rows", "65"], "--rows 1..64"),
    (["--rows", "0"], "--rows 1..64"),
    (["--reps", "0"], "--reps >= 1"),
    (["--pdl", "2"], "--pdl 0 or 1"),
    (["--shape", "lm_head"], "--shape one of qkv, o, gate_up, gate_up_silu, down"),
])
def test_bad_arguments_are_refused_by_name(binary, args, says):
    proc = run(binary, *args)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


def test_without_a_gpu_it_says_what_failed(binary):
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        pytest.skip("a GPU is here: the gpu test below runs instead")
    proc = run(binary, "--reps", 1)
    assert proc.returncode == 1 and proc.stderr.startswith("bench_rows_wgmma: cudaGetDeviceProperties"), proc.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("pdl", [0, 1])
def test_every_launch_agrees_with_the_reference(binary, pdl):
    proc = run(binary, "--reps", 1, "--pdl", pdl)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line for line in proc.stdout.splitlines() if re.match(r"\| (qkv|o|gate_up|gate_up_silu|down) \|", line)]
    # cuBLAS and 32 launches ((tiles, stages) (1, 8), (1, 4), (2, 4), (2, 2) x shares 1, 2, 3, 4, 6, 8, 12,
    # 16) for each of the five shapes (a cluster size the device cannot hold says so in its row).
    assert len(rows) == 5 * 33, proc.stdout
    assert sum("no cluster of this size fits" not in line for line in rows) >= 5 * 25, proc.stdout
    assert not any("FAILED" in line for line in rows), proc.stdout
    assert "every launch within 2^-7 of the float reference" in proc.stdout
