"""The standalone CUDA benches of bench/policy (bench_stream.cu, bench_rows_wgmma.cu): built once a
test module with nvcc, run as processes, and whether this machine has a GPU to run them on."""
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def build(tmp_path_factory, source, *flags, libraries=()):
    """bench/policy/`source` built by nvcc with `flags` (then `libraries`, as -l flags) into a
    temporary folder: its path. Skips the test where nvcc, or a library beside it, is missing."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    toolkit = pathlib.Path(nvcc).resolve().parents[1]
    for lib in libraries:
        if not any(toolkit.glob(f"lib64/lib{lib}.so*")) and not any(toolkit.glob(f"targets/*/lib/lib{lib}.so*")):
            pytest.skip(f"no lib{lib} beside {nvcc}")
    name = pathlib.Path(source).stem
    out = tmp_path_factory.mktemp(name) / name
    # The libraries found at run time where nvcc's are, whatever the loader's own path holds.
    rpath = ["-Xlinker", f"-rpath={toolkit / 'lib64'}"] if libraries else []
    done = subprocess.run([nvcc, *flags, "-o", str(out), str(ROOT / "bench/policy" / source),
                           *[f"-l{lib}" for lib in libraries], *rpath], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return out


def run(binary, *args):
    """The bench with `args` (each made a string), its output captured."""
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=600)


def gpu_here():
    """Whether nvidia-smi lists a GPU on this machine."""
    return bool(shutil.which("nvidia-smi")) and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def assert_refused(binary, args, says):
    """The bench given bad `args` exits 2 with `says` in its error."""
    proc = run(binary, *args)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


def assert_fails_without_a_gpu(binary, *args):
    """Where there is no GPU, the bench exits 1 saying the first CUDA call that failed (skipped where
    there is one: the gpu tests run instead)."""
    if gpu_here():
        pytest.skip("a GPU is here: the gpu tests run instead")
    proc = run(binary, *args)
    name = pathlib.Path(binary).name
    assert proc.returncode == 1 and proc.stderr.startswith(f"{name}: cudaGetDeviceProperties"), proc.stderr
