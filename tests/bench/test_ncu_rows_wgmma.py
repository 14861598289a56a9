"""bench/policy/ncu_rows_wgmma.sh (CPU, with a stand-in for ncu that records its arguments): for each
"SHAPE TILES,STAGES,SHARES" it profiles the wgmma kernel's four checking launches and, from the first
kernel after the bench's fills, every kernel of cuBLAS's four checks; the fills it skips are counted
from the shape's weight bytes (256 MB of copies, at least 2, plus x and the bias), so a wrong count
profiles fills or misses cuBLAS. An unknown shape or a missing ROWS or OUT is refused by name."""
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "policy" / "ncu_rows_wgmma.sh"


@pytest.fixture
def fake_ncu(tmp_path):
    log = tmp_path / "ncu-calls.txt"
    ncu = tmp_path / "ncu"
    ncu.write_text(f"#!/usr/bin/env bash\necho \"$*\" >> {log}\necho profiled\n")
    ncu.chmod(0o755)
    return ncu, log


def run(args, env_extra, tmp_path):
    """The script with the environment's own ROWS, OUT, NCU and SOURCE replaced by env_extra's."""
    env = {k: v for k, v in os.environ.items() if k not in ("ROWS", "OUT", "NCU", "SOURCE")}
    env.update(env_extra)
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)


def copies(n, d):
    return max(2, (256 << 20) // (n * d * 2))


def test_each_shape_profiles_the_kernel_and_cublas_after_its_fills(tmp_path, fake_ncu):
    ncu, log = fake_ncu
    out = tmp_path / "out"
    proc = run(["o 1,8,8", "qkv 1,8,8", "gate_up_silu 1,4,2", "down 1,8,8"],
               {"ROWS": "/bin/true", "OUT": str(out), "NCU": str(ncu)}, tmp_path)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert len(calls) == 8, calls
    expected_skip = {"o": 1 + copies(896, 896), "qkv": 1 + copies(1152, 896) + 1,
                     "gate_up_silu": 1 + copies(9728, 896), "down": 1 + copies(896, 4864)}
    for i, (shape, launch) in enumerate([("o", "1,8,8"), ("qkv", "1,8,8"), ("gate_up_silu", "1,4,2"),
                                         ("down", "1,8,8")]):
        kernel, cublas = calls[2 * i].split(), calls[2 * i + 1].split()
        assert "regex:rows_wgmma" in kernel and kernel[kernel.index("--launch-count") + 1] == "4"
        assert "--launch-skip" in cublas and int(cublas[cublas.index("--launch-skip") + 1]) == expected_skip[shape]
        for words in (kernel, cublas):
            assert words[words.index("--shape") + 1] == shape and words[words.index("--launch") + 1] == launch
            assert "--clock-control" in words and words[words.index("--clock-control") + 1] == "none"
        assert (out / f"ncu-wgmma-{shape}.txt").read_text().strip() == "profiled"
        assert (out / f"ncu-cublas-{shape}.txt").read_text().strip() == "profiled"
    # o: 1.6 MB of weights, 167 copies in 256 MB: the skip is x's fill and theirs.
    assert expected_skip["o"] == 168


def test_an_unknown_shape_is_refused_by_name(tmp_path, fake_ncu):
    ncu, log = fake_ncu
    proc = run(["lm_head 1,8,8"], {"ROWS": "/bin/true", "OUT": str(tmp_path / "out"), "NCU": str(ncu)}, tmp_path)
    assert proc.returncode == 2
    assert "unknown shape 'lm_head'" in proc.stderr
    assert not log.exists()


@pytest.mark.parametrize("missing", ["ROWS", "OUT"])
def test_rows_and_out_are_required(tmp_path, fake_ncu, missing):
    ncu, _ = fake_ncu
    env = {"ROWS": "/bin/true", "OUT": str(tmp_path / "out"), "NCU": str(ncu)}
    del env[missing]
    proc = run(["o 1,8,8"], env, tmp_path)
    assert proc.returncode != 0
    assert missing in proc.stderr


def test_source_exports_the_64_row_launch_and_prints_its_source_page(tmp_path, fake_ncu):
    ncu, log = fake_ncu
    out = tmp_path / "out"
    proc = run(["down 1,8,8"], {"ROWS": "/bin/true", "OUT": str(out), "NCU": str(ncu), "SOURCE": "1"}, tmp_path)
    assert proc.returncode == 0, proc.stderr
    calls = [line.split() for line in log.read_text().splitlines()]
    assert len(calls) == 4, calls
    export, page = calls[2], calls[3]
    # The fourth checking launch (64 rows) of the kernel alone, exported under OUT.
    assert export[export.index("--launch-skip") + 1] == "3" and export[export.index("--launch-count") + 1] == "1"
    assert export[export.index("-o") + 1] == str(out / "ncu-wgmma-down")
    assert page[:2] == ["-i", str(out / "ncu-wgmma-down.ncu-rep")] and "--page" in page and "source" in page
    assert (out / "ncu-wgmma-down-source.csv").read_text().strip() == "profiled"
