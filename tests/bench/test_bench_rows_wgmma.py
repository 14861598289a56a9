"""bench/policy/bench_rows_wgmma.cu: it builds with nvcc for sm_90a (wgmma, tensor copies), refuses bad
arguments by name, and says what is wrong where there is no GPU (CPU); on a GPU every launch of the
wgmma kernel (each tile width, ring depth and number of shares; plain, with a bias, with the SwiGLU
epilogue; the cluster's sums read in batches or one block at a time) and cuBLAS's agree with the float reference at 1, 7, 33 and 64 rows, and the table has a row
for each, or for the one launch asked for (gpu)."""
import re

import pytest
from standalone_cuda import assert_fails_without_a_gpu, assert_refused, build, run  # tests/bench, on pytest's path


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    return build(tmp_path_factory, "bench_rows_wgmma.cu", "-std=c++17", "-O3", "-gencode",
                 "arch=compute_90a,code=sm_90a", libraries=["cublas"])


@pytest.mark.parametrize("args, says", [
    (["--rows"], "unknown or incomplete argument '--rows'"),
    (["--reps", "2", "--fast"], "unknown or incomplete argument '--fast'"),
    (["--rows", "65"], "--rows 1..64"),
    (["--rows", "0"], "--rows 1..64"),
    (["--reps", "0"], "--reps >= 1"),
    (["--pdl", "2"], "--pdl 0 or 1"),
    (["--shape", "lm_head"], "--shape one of qkv, o, gate_up, gate_up_silu, down"),
    (["--launch", "1,8"], "--launch takes TILES,STAGES,SHARES[,CHUNKS[,XRES]] (e.g. 1,8,8 or 1,2,8,4 or 1,6,1,1,14), "
                          "got '1,8'"),
    (["--launch", "1,8,8x"], "got '1,8,8x'"),
    (["--launch", "1,2,8,4,1,1"], "got '1,2,8,4,1,1'"),
    (["--launch", "3,8,2"], "--launch 3,8,2,1,0 is not built"),
    (["--launch", "1,8,5"], "--launch 1,8,5,1,0 is not built"),
    (["--launch", "1,2,8,3"], "--launch 1,2,8,3,0 is not built"),
    (["--launch", "0,9,9,9"], "--launch 0,9,9,9,0 is not built"),
    (["--launch", "1,6,1,1,13"], "--launch 1,6,1,1,13 is not built"),
    (["--launch", "1,8,2,1,14"], "--launch 1,8,2,1,14 is not built"),
    (["--exchange", "atomic"], "--exchange batched or serial, got 'atomic'"),
])
def test_bad_arguments_are_refused_by_name(binary, args, says):
    assert_refused(binary, args, says)


def test_without_a_gpu_it_says_what_failed(binary):
    assert_fails_without_a_gpu(binary, "--reps", 1)


@pytest.mark.gpu
@pytest.mark.parametrize("pdl, exchange", [(0, "batched"), (1, "batched"), (1, "serial")])
def test_every_launch_agrees_with_the_reference(binary, pdl, exchange):
    proc = run(binary, "--reps", 1, "--pdl", pdl, "--exchange", exchange)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line for line in proc.stdout.splitlines() if re.match(r"\| (qkv|o|gate_up|gate_up_silu|down) \|", line)]
    # cuBLAS and each launch ((tiles, stages, chunks) (1, 8, 1), (1, 4, 1), (2, 4, 1), (2, 2, 1), (1, 2, 4),
    # (1, 4, 2), (1, 2, 2) x shares 1, 2, 3, 4, 6, 8, 12, 16, at most d's 64-element chunks: 14 for the four
    # shapes of d 896, 76 for down) for each shape (a cluster size the device cannot hold says so in its row).
    # With x resident, where a block's chunks (d's split over the shares, rounded up) fit its room:
    # (1, 6, 1) and (2, 3, 1) with room for 14 at every share count of d 896 (7 each) and at 6, 8, 12 and 16
    # shares of down (4 each); (1, 8, 1) with 8 and (1, 3, 1) with 7 at 2 or more shares of d 896 (6 each)
    # and at 12 and 16 of down (2 each).
    assert len(rows) == 4 * (1 + 7 * 7 + 26) + (1 + 7 * 8 + 12), proc.stdout
    assert sum("no cluster of this size fits" not in line for line in rows) >= 5 * 25, proc.stdout
    assert not any("FAILED" in line for line in rows), proc.stdout
    assert "every launch within 2^-7 of the float reference" in proc.stdout


@pytest.mark.gpu
def test_one_launch_alone_is_that_launch_beside_cublas(binary):
    proc = run(binary, "--reps", 1, "--shape", "o", "--launch", "1,8,8")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| o |")]
    assert len(rows) == 2, proc.stdout
    assert "| cuBLAS |" in rows[0] and "wgmma 128 rows a block, 8 stages, 8 shares" in rows[1], proc.stdout
    proc = run(binary, "--reps", 1, "--shape", "down", "--launch", "1,2,3,4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| down |")]
    assert len(rows) == 2 and "wgmma 128 rows a block, 2 stages of 4 chunks, 3 shares" in rows[1], proc.stdout
    proc = run(binary, "--reps", 1, "--shape", "gate_up", "--launch", "1,6,1,1,14")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| gate_up |")]
    assert len(rows) == 2 and "wgmma 128 rows a block, 6 stages, 1 shares, x resident (14)" in rows[1], proc.stdout


@pytest.mark.gpu
def test_one_launch_with_more_shares_than_chunks_is_refused(binary):
    # o's d (896) has 14 chunks of 64: a cluster of 16 would leave blocks with nothing to add.
    proc = run(binary, "--reps", 1, "--shape", "o", "--launch", "1,8,16")
    assert proc.returncode == 2
    assert "o's d has 14 chunks, fewer than its 16 shares" in proc.stderr


@pytest.mark.gpu
def test_one_launch_whose_x_does_not_fit_its_room_is_refused(binary):
    # down's d (4864) is 76 chunks of 64: one share a block would need room for 76, the form has 14.
    proc = run(binary, "--reps", 1, "--shape", "down", "--launch", "1,6,1,1,14")
    assert proc.returncode == 2
    assert "more a block than its resident x holds" in proc.stderr
