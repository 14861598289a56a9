"""bench/policy/kernel_bench.py (CPU): what the kernel benches share. Each bench checks --tool before
it runs anything, and each card's read rates are set beside its own bandwidth."""
import pathlib
import sys

import pytest

from stand_in_tool import run_script  # tests/bench, on pytest's path

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench/policy"))
import kernel_bench  # noqa: E402


@pytest.mark.parametrize("script", ["bench_fp8_attention.py", "bench_gemv.py"])
def test_a_tool_that_is_not_there_is_named(script):
    proc = run_script(ROOT / "bench/policy" / script, "--tool", "/nonexistent/policy_model_tool")
    assert proc.returncode != 0
    assert "--tool /nonexistent/policy_model_tool: no such file" in proc.stderr


def test_the_bound_is_the_named_cards():
    assert kernel_bench.card_bound("NVIDIA H100 80GB HBM3") == ("H100", 3.35e12)
    assert kernel_bench.card_bound("NVIDIA H200") == ("H200", 4.8e12)
    assert kernel_bench.card_bound("NVIDIA A100-SXM4-80GB") == ("H200 (not this card's)", 4.8e12)
