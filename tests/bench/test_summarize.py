"""bench/policy/summarize.py over a committed run_h200.sh call: every workload's figure, by run,
with the paged layout's placement counts; a path that is not a folder is a clear error."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench/policy/summarize.py"
CALL = ROOT / "bench/results/2026-12-04-policy-h200-paged-in-place/call2"


def summarize(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=60)


def test_a_call_reads_as_one_row_per_run_and_workload():
    proc = summarize(CALL)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 6, proc.stdout
    assert "| batch-1 (kv_layout=paged) | 64 x 512, repeat 0 | 46,453 tok/s | 1.00 runs a row |" in rows
    assert "| batch-1 (kv_layout=paged) | 64 x 512, repeat 1 | 45,895 tok/s | 1.00 runs a row, hit rate 0.969 |" in rows
    assert "| cached-1 (kv_layout=paged) | agent workload, prefix cache | 44.96 s | 1.00 runs a row, hit rate 0.959 |" in rows
    assert "| main | agent workload, prefix cache | 44.51 s | hit rate 0.959 |" in rows


def test_a_run_that_held_prefills_shows_its_passes_and_holds(tmp_path):
    # The CPU dry run's cached workload with prefill_wait_steps 4 (2026-12-06-policy-prefill-wait-cpu.md).
    cached = {"seconds": 2.71, "prefix_hit_rate": 0.9596, "prefill_passes": 33, "prefill_holds": 5}
    (tmp_path / "agent.json").write_text(json.dumps({"prefill_wait_steps": 4, "agent_cached": cached}))
    proc = summarize(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ("| main (prefill_wait_steps=4) | agent workload, prefix cache | 2.71 s | "
            "hit rate 0.960, 33 prefill passes, 5 held |") in proc.stdout, proc.stdout


def test_the_hosts_prefill_launches_and_waits_are_rows(tmp_path):
    cached = {"seconds": 38.25, "prefill_passes": 960, "prefill_host_seconds": 9.6, "wait_seconds": 12.5}
    (tmp_path / "agent.json").write_text(json.dumps({"agent_cached": cached}))
    proc = summarize(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ("| main | agent workload, prefix cache: host time launching prefill passes | 9.60 s (10.00 ms a pass) | "
            "960 passes |") in proc.stdout, proc.stdout
    assert "| main | agent workload, prefix cache: host time waiting for the device | 12.50 s |  |" in proc.stdout


def test_a_missing_folder_is_named(tmp_path):
    proc = summarize(tmp_path / "nowhere")
    assert proc.returncode != 0
    assert "nowhere is not a folder" in proc.stderr


def test_kernels_lists_each_profiled_step_by_kernel_most_time_first():
    call = ROOT / "bench/results/2026-12-05-policy-h200-e4m3-fused-gemv/call2"
    proc = summarize("--kernels", call)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    heading = "**main (kv_cache_dtype=fp8_e4m3), profile_1_row_131072_keys**: 1,373.4 us wall, 2,291.0 us busy a step"
    assert heading in text, text
    table = text.split(heading)[1].split("**")[0].splitlines()
    rows = [line for line in table if line.startswith("| ") and "---" not in line][1:]
    # Names lose their return type, parameters and namespaces; the most time first.
    assert rows[0] == "| fp8_split_kernel<__nv_bfloat16, 64> | 24 | 540.5 | 23.6% |", rows
    assert rows[1].startswith("| fp8_join_kernel<__nv_bfloat16, 64, 1024> | 24 | 516.8 |"), rows
    times = [float(r.split("|")[3].replace(",", "")) for r in rows]
    assert times == sorted(times, reverse=True) and len(rows) == 16


def test_the_attention_bandwidth_read_off_the_turn_times_is_a_row(tmp_path):
    cached = {"seconds": 36.59, "attention_from_turns": {"attention_bytes_per_s": 2.19e12}}
    (tmp_path / "agent.json").write_text(json.dumps({"kv_cache_dtype": "fp8_e4m3", "agent_cached": cached}))
    proc = summarize(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ("| main (kv_cache_dtype=fp8_e4m3) | agent workload, prefix cache: decode attention, from the turn "
            "times | 2.19 TB/s |  |") in proc.stdout, proc.stdout


def test_kernels_with_the_timeline_list_what_each_adds_most_first(tmp_path):
    profile = {"wall_us_per_step": 1200.0, "device_busy_us_per_step": 1900.0, "device_span_us_per_step": 1100.0,
               "device_events_per_step": 185,
               "kernels": [{"name": "void ns::(anonymous namespace)::fp8_join_kernel<float, 64>(float const*)",
                            "calls_per_step": 24, "us_per_step": 500.0, "us_added_per_step": 100.0},
                           {"name": "void gemv_rows_kernel<__nv_bfloat16, 1, true, true>(ns::gemv_args<T>)",
                            "calls_per_step": 24, "us_per_step": 400.0, "us_added_per_step": 330.0}]}
    (tmp_path / "agent.json").write_text(json.dumps({"profile_1_row_131072_keys": profile}))
    proc = summarize("--kernels", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1,200.0 us wall, 1,900.0 us busy a step (1,100.0 us counted once), 185 events" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows == ["| gemv_rows_kernel<__nv_bfloat16, 1, true, true> | 24 | 400.0 | 330.0 | 30.0% |",
                    "| fp8_join_kernel<float, 64> | 24 | 500.0 | 100.0 | 9.1% |"], rows


def test_the_step_split_is_five_rows(tmp_path):
    steps = {"decode_step_seconds_without_attention": 912e-6, "decode_attention_bytes_per_s": 3.4e12,
             "decode_only": {"steps": 8100, "seconds": 20.5, "attention_seconds": 13.1, "rest_seconds": 7.4},
             "prefilling": {"steps": 930, "seconds": 5.2, "tokens": 993856, "seconds_beyond_decode": 2.9},
             "other": {"steps": 0, "seconds": 0.0}, "outside_steps_seconds": 0.4}
    (tmp_path / "agent.json").write_text(json.dumps({"agent_cached": {"seconds": 26.1, "steps": steps}}))
    proc = summarize(tmp_path)
    assert proc.returncode == 0, proc.stderr
    label = "| main | agent workload, prefix cache: "
    for row in ["a decode step without attention, from the step times | 912 us |  |",
                "decode attention, from the step times | 3.40 TB/s |  |",
                "decode-only steps (attention + the rest) | 20.50 s (13.10 + 7.40) | 8,100 steps |",
                "prefilling steps (beyond their decode) | 5.20 s (2.90) | 930 steps, 993,856 tokens |",
                "the bench's own work between steps | 0.40 s |  |"]:
        assert label + row in proc.stdout, proc.stdout


def test_a_patch_ab_of_several_rounds_gets_each_sides_median_against_a(tmp_path):
    # run_patch_ab.sh ROUNDS=3 over the 131k decode, sides a and b2 (one round of b2 stopped by its cap).
    figures = {"a": [770.4, 803.8, 781.0], "b2": [807.9, 790.1, None]}
    for side, values in figures.items():
        for r, value in enumerate(values, 1):
            result = {"kv_cache_dtype": "fp8_e4m3"}
            if value is not None:
                result["long_131072"] = {"decode_tokens_per_s": value}
            (tmp_path / f"agent-1-{side}-r{r}.json").write_text(json.dumps(result))
    proc = summarize(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "| 1-b2-r1 (kv_cache_dtype=fp8_e4m3) | one sequence at 131,072: decode | 807.9 tok/s |  |" in proc.stdout
    assert ("| 1 | one sequence at 131,072: decode | a | 770.40, 803.80, 781.00 | 781.00 tok/s | 1.000x |"
            in proc.stdout), proc.stdout
    # b2's two rounds: median 799.0, against a's 781.0.
    assert ("| 1 | one sequence at 131,072: decode | b2 | 807.90, 790.10 | 799.00 tok/s | 1.023x |"
            in proc.stdout), proc.stdout


def test_a_single_round_ab_has_no_rounds_table(tmp_path):
    (tmp_path / "agent-1-a.json").write_text(json.dumps({"long_131072": {"decode_tokens_per_s": 800.0}}))
    proc = summarize(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "| 1-a | one sequence at 131,072: decode | 800.0 tok/s |  |" in proc.stdout
    assert "against a" not in proc.stdout
