"""bench/policy/bench_agent.py's turn_slope: the decode attention's bandwidth read off the cached
agent workload's per-turn times; step_split: the run's time by kind of step, read off agent-bench's
step times; its --tool checked before any run; a dry run end to end with the built tool (CPU; the
module imports torch and transformers, no GPU)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench/policy"))
bench_agent = pytest.importorskip("bench_agent")


@pytest.fixture
def kv_bytes(monkeypatch):
    def use(n):
        monkeypatch.setattr(bench_agent, "KV_ELEMENT_BYTES", n)
    return use


def progress(durations):
    """agent-bench's progress lines for turns of these durations."""
    total, lines = 0.0, []
    for j, d in enumerate(durations, 1):
        total += d
        lines.append({"turn": j, "seconds": total})
    return lines


def test_linear_turn_times_give_their_slope_and_the_bytes_over_it(kv_bytes):
    kv_bytes(2)
    # Turn 1 (captures) and the last turn (cut short) are left out of the fit.
    got = bench_agent.turn_slope(progress([5.0] + [0.5 + 0.02 * j for j in range(10)] + [0.1]), 4, 10, 6, 20)
    assert got["turn_seconds_slope"] == pytest.approx(0.02)
    # 0.5B shape: 24 layers x 2 x 2 KV heads x 64 x 2 bytes a position.
    assert got["key_bytes_added_per_turn"] == 6 * 4 * 16 * 24 * 2 * 2 * 64 * 2
    assert got["attention_bytes_per_s"] == pytest.approx(got["key_bytes_added_per_turn"] / 0.02)
    # Turn 2 (0.5 s) decodes over 20 + 16 + 3 keys on average: 39 / 16 turns' growth of 0.02 s.
    assert got["turn_seconds_without_attention"] == pytest.approx(0.5 - 0.02 * 39 / 16)
    assert got["run_seconds_without_attention"] == pytest.approx(12 * (0.5 - 0.02 * 39 / 16))


def test_too_few_turns_or_no_growth_give_no_bandwidth(kv_bytes):
    kv_bytes(2)
    assert bench_agent.turn_slope(progress([1.0, 1.0, 1.0, 1.0]), 4, 10, 6, 20) is None
    flat = bench_agent.turn_slope(progress([1.0] * 8), 4, 10, 6, 20)
    assert flat["turn_seconds_slope"] == pytest.approx(0.0) and flat["attention_bytes_per_s"] is None
    assert flat["turn_seconds_without_attention"] == pytest.approx(1.0)


def test_the_e4m3_run_on_the_h200_read_its_added_keys_at_about_2_2_tb_s(kv_bytes):
    kv_bytes(1)
    run = json.loads((ROOT / "bench/results/2026-12-05-policy-h200-e4m3-fused-gemv/call2/agent.json").read_text())
    got = bench_agent.turn_slope(run["agent_cached"]["turns"], 64, 500, 300, 1000)
    assert got["attention_bytes_per_s"] == pytest.approx(2.19e12, rel=0.01)
    # Of its 36.59 s, what the turns cost besides attention: 0.54 s a turn, ~16 s in all.
    assert got["turn_seconds_without_attention"] == pytest.approx(0.54, abs=0.01)
    assert 15.5 < got["run_seconds_without_attention"] < 16.7


def step_times(decode, prefilling=(), other=()):
    """agent-bench's step_times for steps given as (seconds, keys, rows, prefilled tokens)."""
    def sums(steps):
        return {"steps": len(steps), "seconds": sum(s[0] for s in steps), "keys": sum(s[1] for s in steps),
                "keys_sq": sum(s[1] ** 2 for s in steps), "keys_seconds": sum(s[0] * s[1] for s in steps),
                "rows": sum(s[2] for s in steps), "tokens": sum(s[3] for s in steps)}
    return {"decode_only": sums(decode), "prefilling": sums(prefilling), "other": sums(other)}


def test_decode_steps_on_a_line_give_its_intercept_and_slope_and_prefills_what_they_add(kv_bytes):
    kv_bytes(1)
    # A decode step: 900 us plus 1 ns a key attended; a prefilling step 4 ms more than its decode.
    line = [(900e-6 + 1e-9 * k, k, 64, 0) for k in range(64_000, 1_300_000, 64 * 800)]
    prefilling = [(900e-6 + 1e-9 * k + 4e-3, k, 62, 1002) for k in (100_000, 700_000)]
    times = step_times(line, prefilling, [(1e-4, 0, 0, 0)])
    got = bench_agent.step_split(times, 0.25 + sum(times[k]["seconds"] for k in times))
    assert got["decode_step_seconds_without_attention"] == pytest.approx(900e-6)
    assert got["decode_attention_bytes_per_s"] == pytest.approx(bench_agent.kv_bytes_per_key() / 1e-9)
    d = got["decode_only"]
    assert d["steps"] == len(line)
    assert d["attention_seconds"] + d["rest_seconds"] == pytest.approx(d["seconds"])
    assert d["rest_seconds"] == pytest.approx(900e-6 * len(line))
    p = got["prefilling"]
    assert (p["steps"], p["tokens"]) == (2, 2004)
    assert p["seconds_beyond_decode"] == pytest.approx(8e-3)
    assert got["other"] == {"steps": 1, "seconds": 1e-4}
    assert got["outside_steps_seconds"] == pytest.approx(0.25)
    assert bench_agent.step_split(times)["outside_steps_seconds"] is None


def test_too_few_decode_steps_or_no_spread_in_their_keys_give_no_split():
    assert bench_agent.step_split(step_times([(1e-3, 1000, 64, 0)] * 2)) is None
    assert bench_agent.step_split(step_times([(1e-3, 1000, 64, 0)] * 5)) is None


def test_a_tool_that_is_not_there_is_named_before_any_run(tmp_path):
    missing = tmp_path / "policy_model_tool"
    proc = subprocess.run([sys.executable, str(ROOT / "bench/policy/bench_agent.py"), "--tool", str(missing),
                           "--dry-run", "--out", str(tmp_path / "out.json")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    assert f"--tool {missing}: no such file" in proc.stderr
    assert not (tmp_path / "out.json").exists()


def test_a_dry_run_profiles_a_turns_arrivals_and_reports_the_hosts_prefill_time(tmp_path):
    """The script end to end on the CPU with the built tool: the cached run's JSON carries the
    engine's host counters, and --profile-turn 1 records the steps as turn 2's prompts arrive (a
    prefill pass among them)."""
    build = pathlib.Path(os.environ.get("CAF_AGENT_BUILD_DIR", ROOT / "build"))
    tool = build / "policy/model/policy_model_tool"
    if not tool.exists():
        if os.environ.get("CAF_AGENT_ALLOW_SKIP") == "1":
            pytest.skip(f"{tool} not built")
        pytest.fail(f"{tool} not built (cmake --build <build> --target policy_model_tool)")
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench/policy/bench_agent.py"), "--dry-run", "--tool", str(tool),
                           "--episodes", "2", "--turns", "2", "--system", "40", "--obs", "20", "--reply", "8",
                           "--skip-uncached", "--skip", "batch", "long", "--profile-out", str(tmp_path / "profiles"),
                           "--profile-turn", "1", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    cached = result["agent_cached"]
    assert cached["prefill_passes"] > 0 and cached["prefill_host_seconds"] > 0 and cached["wait_seconds"] == 0
    window = result["profile_cached_turn_2"]
    assert window["steps"] > 0 and window["prefill_passes"] >= 1
    assert (tmp_path / "profiles/profile-cached-turn.json").exists()
