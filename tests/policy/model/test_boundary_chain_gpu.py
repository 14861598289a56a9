"""policy_model_tool boundary-chain on the GPU (marker gpu: the device machine only): the measurement
behind bench/policy/bench_boundaries.py (policy/model/boundary_kernels.hpp).

Both ways of meeting between phases compute the same sums from the same bytes: each phase's block
sums fold its share of the phase's bytes and every block sum of the phase before. A flags chain
whose blocks read the phase before early (a barrier that does not hold) would leave other sums than
the kernels' chain, whose phases are ordered by the kernels' ends; the tool's last chain runs over
zeroed sums, so stale sums of an earlier chain cannot hide it."""
import json

import pytest
import torch

from test_policy_model import run_tool

pytestmark = pytest.mark.gpu


def chain(*args):
    proc = run_tool("boundary-chain", "--device", "cuda", *args)
    return json.loads([x for x in proc.stdout.splitlines() if x.startswith("{")][-1])


@pytest.mark.parametrize("phases", [1, 24])
def test_kernels_and_flags_give_the_same_sums(cuda, phases):
    common = ["--bytes", 2 * 1024 * 1024, "--phases", phases, "--blocks", 132, "--time", 3]
    ordered = chain("--mode", "kernels", *common)
    unordered = chain("--mode", "kernels", "--no-programmatic-launch", *common)
    flags = chain("--mode", "flags", *common)
    for r in (ordered, unordered, flags):
        assert r["blocks"] == 132 and r["phases"] == phases and r["bytes_per_phase"] == 2 * 1024 * 1024
        assert r["us_per_phase"] > 0 and r["resident_blocks"] >= 132
        assert r["last_sums"] > 0
    assert ordered["programmatic_launch"] and not unordered["programmatic_launch"]
    assert ordered["last_sums"] == unordered["last_sums"] == flags["last_sums"]


def test_flags_refuse_more_blocks_than_are_resident(cuda):
    resident = chain("--mode", "flags", "--bytes", 1024 * 1024, "--phases", 2, "--time", 1)["resident_blocks"]
    proc = run_tool("boundary-chain", "--device", "cuda", "--mode", "flags", "--bytes", 16 * (resident + 1),
                    "--phases", 2, "--blocks", resident + 1, "--time", 1, check=False)
    assert proc.returncode == 2 and f"--mode flags takes at most {resident} blocks" in proc.stderr, proc.stderr


def test_blocks_a_multiprocessor_are_counted_from_the_device(cuda):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    r = chain("--mode", "flags", "--bytes", 1024 * 1024, "--phases", 2, "--blocks-per-sm", 1, "--time", 1)
    assert r["blocks"] == sms
    proc = run_tool("boundary-chain", "--device", "cuda", "--mode", "flags", "--bytes", 1024 * 1024,
                    "--blocks-per-sm", 1, "--blocks", 4, check=False)
    assert proc.returncode == 2 and "not with --blocks" in proc.stderr, proc.stderr
