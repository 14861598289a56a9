"""Parity of the C++ policy model (policy_model_tool) with Hugging Face transformers.

Tiny random Llama / Qwen2 / Qwen3 checkpoints are written by transformers into a temporary
directory; the C++ side must load them, give the same logits, generate the same greedy tokens,
report logprobs PPO can use, and save them back bit-exactly.
"""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
from cafagent_testlib import tiny_decoder_families  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[3]
TOOL = pathlib.Path(os.environ.get("CAF_AGENT_BUILD_DIR", REPO / "build")) / "policy/model/policy_model_tool"
# Rationale: fp32 on CPU differs from transformers only by summation order (~1e-6 here).
LOGIT_TOL = 1e-4
VOCAB = 512

FAMILIES = tiny_decoder_families(VOCAB, max_positions=256)


def _randomize(model):
    # Rationale: transformers' init (std 0.02, unit norms, zero biases) gives near-uniform logits
    # and leaves biases and norm weights untested; larger random values make every path count.
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.copy_(1.0 + 0.2 * noise if "norm" in name else 0.15 * noise)


def run_tool(*args, check=True):
    if not TOOL.exists():
        if os.environ.get("CAF_AGENT_ALLOW_SKIP") == "1":
            pytest.skip(f"{TOOL} not built")
        pytest.fail(f"{TOOL} not built (cmake --build <build> --target policy_model_tool)")
    proc = subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"policy_model_tool {args[0]} failed: {proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_models")
    out = {}
    for family, make_config in FAMILIES.items():
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(make_config()).eval()
        _randomize(model)
        model.save_pretrained(root / family)
        out[family] = (root / family, model)
    return out


def sharp_qwen2(path, max_positions=4096):
    """A small random Qwen2 (vocab 512, hidden 256, 2 layers, GQA 4/2, `max_positions` positions:
    the weights do not depend on it) with weights larger than the default init, so that logits and
    attention are not near uniform; saved to `path`, returned in eval mode."""
    config = transformers.Qwen2Config(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=max_positions,
                                      tie_word_embeddings=True)
    torch.manual_seed(0)
    m = transformers.Qwen2ForCausalLM(config).eval()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen) if "norm" in name
                    else 0.08 * torch.randn(p.shape, generator=gen))
    m.save_pretrained(path)
    return m


def ids(tokens):
    return ",".join(str(t) for t in tokens)


def cpp_floats(tmp_path, *args):
    out = tmp_path / "out.bin"
    run_tool(*args, "--out", out)
    return np.fromfile(out, dtype=np.float32)


@pytest.mark.parametrize("family", FAMILIES)
def test_logits_match_transformers(models, family, tmp_path):
    path, model = models[family]
    tokens = [5, 17, 300, 2, 99, 511, 0, 42, 42, 7, 250, 128]
    got = cpp_floats(tmp_path, "logits", "--model", path, "--tokens", ids(tokens)).reshape(len(tokens), VOCAB)
    with torch.no_grad():
        want = model(torch.tensor([tokens])).logits[0].numpy()
    assert np.abs(got - want).max() < LOGIT_TOL


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_generation_matches_transformers(models, family):
    path, model = models[family]
    prompts = [[3, 1, 4, 1, 5], [9, 2, 6, 5, 3, 5, 8, 9, 7], [271]]
    # max-batch 2 < 3 prompts: the third is admitted when the first slot frees (continuous batching).
    proc = run_tool("generate", "--model", path, "--prompts", ";".join(ids(p) for p in prompts),
                    "--max-new-tokens", 10, "--temperature", 0, "--max-batch", 2, "--report-logits")
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == len(prompts)
    for prompt, result in zip(prompts, results):
        with torch.no_grad():
            out = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=10,
                                 min_new_tokens=10, pad_token_id=0, output_logits=True,
                                 return_dict_in_generate=True)
        want = out.sequences[0, len(prompt):].tolist()
        assert result["tokens"] == want
        assert result["reason"] == "max_new_tokens"
        # Greedy reports log softmax at temperature 1 of the chosen token.
        want_logp = [torch.log_softmax(l[0], -1)[t].item() for l, t in zip(out.logits, want)]
        assert np.allclose(result["logprobs"], want_logp, atol=LOGIT_TOL)
        # --report-logits: each token's own logit.
        assert np.allclose(result["logits"], [l[0][t].item() for l, t in zip(out.logits, want)], atol=LOGIT_TOL)


def _e4m3_sdpa(module, query, key, value, attention_mask, **kwargs):
    """transformers' sdpa attention over keys and values rounded to e4m3 (saturated at +-448), as
    the engine's e4m3 KV cache stores them: every read, a prompt's own keys' too."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def rounded(t):
        return t.float().clamp(-448, 448).to(torch.float8_e4m3fn).to(t.dtype)
    return sdpa_attention_forward(module, query, rounded(key), rounded(value), attention_mask, **kwargs)


def test_e4m3_kv_cache_matches_transformers_over_e4m3_keys(models):
    """--kv-cache-dtype fp8_e4m3 (fp16 model, continuous batching over 2 seats): greedy tokens are
    the argmax of fp32 transformers whose attention reads keys and values rounded to e4m3, and the
    logprobs are within 0.06 of its (fp16 rounding, and a key near an e4m3 boundary rounding the
    other way); transformers without the rounding is 5x further on average (so the test sees the
    rounding, not only fp16 noise)."""
    transformers.AttentionInterface.register("e4m3_sdpa", _e4m3_sdpa)
    path, model = models["qwen2"]
    prompts = [[3, 1, 4, 1, 5], [9, 2, 6, 5, 3, 5, 8, 9, 7], [271]]
    proc = run_tool("generate", "--model", path, "--dtype", "float16", "--kv-cache-dtype", "fp8_e4m3",
                    "--prompts", ";".join(ids(p) for p in prompts), "--max-new-tokens", 12, "--temperature", 0,
                    "--max-batch", 2)
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == len(prompts)

    def reference(sequence, n_prompt, attention):
        before = model.config._attn_implementation
        model.set_attn_implementation(attention)
        try:
            with torch.no_grad():
                logits = model(torch.tensor([sequence])).logits[0].float()
        finally:
            model.set_attn_implementation(before)
        logp = torch.log_softmax(logits, -1)
        steps = range(n_prompt, len(sequence))
        return [int(logits[i - 1].argmax()) for i in steps], np.array([logp[i - 1, sequence[i]].item() for i in steps])

    gaps_e4m3, gaps_plain = [], []
    for prompt, result in zip(prompts, results):
        sequence = prompt + result["tokens"]
        argmax, want = reference(sequence, len(prompt), "e4m3_sdpa")
        _, plain = reference(sequence, len(prompt), "sdpa")
        assert result["tokens"] == argmax
        got = np.array(result["logprobs"])
        assert np.abs(got - want).max() < 0.06
        gaps_e4m3.append(np.abs(got - want).mean())
        gaps_plain.append(np.abs(got - plain).mean())
    assert 5 * np.mean(gaps_e4m3) < np.mean(gaps_plain), (gaps_e4m3, gaps_plain)


def test_sampled_logprobs_are_temperature_scaled_policy_logprobs(models):
    path, model = models["qwen2"]
    prompt, temperature = [7, 8, 9], 0.7
    proc = run_tool("generate", "--model", path, "--prompts", ids(prompt), "--max-new-tokens", 8,
                    "--temperature", temperature, "--top-k", 20, "--top-p", 0.9, "--seed", 11)
    result = json.loads(proc.stdout.splitlines()[0])
    seq = torch.tensor([prompt + result["tokens"]])
    with torch.no_grad():
        logits = model(seq).logits[0, len(prompt) - 1:-1]
    want = torch.log_softmax(logits / temperature, -1).gather(1, torch.tensor(result["tokens"])[:, None])
    # Unfiltered: the learner's log_softmax(logits / T) over the full vocabulary.
    assert np.allclose(result["logprobs"], want[:, 0].numpy(), atol=LOGIT_TOL)
    again = run_tool("generate", "--model", path, "--prompts", ids(prompt), "--max-new-tokens", 8,
                     "--temperature", temperature, "--top-k", 20, "--top-p", 0.9, "--seed", 11)
    assert json.loads(again.stdout.splitlines()[0])["tokens"] == result["tokens"]


def test_token_logprobs_match_transformers(models, tmp_path):
    path, model = models["qwen3"]
    tokens = [1, 2, 3, 400, 5, 6]
    got = cpp_floats(tmp_path, "logprobs", "--model", path, "--tokens", ids(tokens), "--temperature", 0.5)
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([tokens])).logits[0, :-1] / 0.5, -1)
    want = logp.gather(1, torch.tensor(tokens[1:])[:, None])[:, 0].numpy()
    assert np.abs(got - want).max() < LOGIT_TOL


def _assert_same_tensors(dir_a, dir_b):
    def tensors(d):
        files = sorted(pathlib.Path(d).glob("*.safetensors"))
        assert files, f"no safetensors in {d}"
        out = {}
        for f in files:
            out.update(load_file(f))
        return out
    a, b = tensors(dir_a), tensors(dir_b)
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert torch.equal(a[name].view(torch.uint8), b[name].view(torch.uint8)), name


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_save_round_trip_is_bit_exact(models, family, tmp_path):
    path, _ = models[family]
    run_tool("save", "--model", path, "--out", tmp_path / "copy")
    _assert_same_tensors(path, tmp_path / "copy")


def test_bf16_sharded_round_trip_loads_in_transformers(models, tmp_path):
    path, _ = models["qwen3"]
    src = tmp_path / "bf16"
    src.mkdir()
    (src / "config.json").write_text((path / "config.json").read_text())
    bf16 = {k: v.to(torch.bfloat16) for k, v in load_file(path / "model.safetensors").items()}
    save_file(bf16, src / "model.safetensors", metadata={"format": "pt"})
    # Rationale: 40 kB shards force several files and the index for a ~200 kB model.
    run_tool("save", "--model", src, "--out", tmp_path / "sharded", "--dtype", "bfloat16",
             "--shard-bytes", 40000)
    assert (tmp_path / "sharded/model.safetensors.index.json").exists()
    _assert_same_tensors(src, tmp_path / "sharded")
    load = transformers.AutoModelForCausalLM.from_pretrained
    tokens = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        assert torch.equal(load(tmp_path / "sharded", dtype=torch.bfloat16)(tokens).logits,
                           load(src, dtype=torch.bfloat16)(tokens).logits)


def test_value_head_loads_and_round_trips(models, tmp_path):
    path, model = models["qwen2"]
    critic = tmp_path / "critic"
    critic.mkdir()
    (critic / "config.json").write_text((path / "config.json").read_text())
    tensors = load_file(path / "model.safetensors")
    gen = torch.Generator().manual_seed(1)
    tensors["value_head.weight"] = torch.randn(1, 64, generator=gen)
    tensors["value_head.bias"] = torch.randn(1, generator=gen)
    save_file(tensors, critic / "model.safetensors", metadata={"format": "pt"})
    tokens = [4, 8, 15, 16, 23, 42]
    got = cpp_floats(tmp_path, "values", "--model", critic, "--tokens", ids(tokens))
    with torch.no_grad():
        hidden = model(torch.tensor([tokens]), output_hidden_states=True).hidden_states[-1][0]
    want = (hidden @ tensors["value_head.weight"].T + tensors["value_head.bias"])[:, 0].numpy()
    assert np.abs(got - want).max() < LOGIT_TOL
    run_tool("save", "--model", critic, "--out", tmp_path / "critic2", "--value-head")
    _assert_same_tensors(critic, tmp_path / "critic2")
    missing = run_tool("values", "--model", path, "--tokens", "1,2", "--out", tmp_path / "x", check=False)
    assert missing.returncode == 1 and "value head" in missing.stderr


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(model_type="gpt2"), "model_type 'gpt2'"),
    (lambda c: c.update(hidden_act="gelu"), "hidden_act 'gelu'"),
    (lambda c: c.update(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}), "yarn"),
    (lambda c: c.update(hidden_size=32), "shape"),
    (lambda c: c.pop("vocab_size"), "vocab_size"),
])
def test_bad_config_is_a_clear_error(models, tmp_path, edit, message):
    path, _ = models["qwen2"]
    config = json.loads((path / "config.json").read_text())
    edit(config)
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").write_bytes((path / "model.safetensors").read_bytes())
    proc = run_tool("logits", "--model", tmp_path, "--tokens", "1", "--out", tmp_path / "x", check=False)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr


def test_truncated_and_missing_checkpoints_are_clear_errors(models, tmp_path):
    path, _ = models["qwen2"]
    (tmp_path / "config.json").write_text((path / "config.json").read_text())
    proc = run_tool("logits", "--model", tmp_path, "--tokens", "1", "--out", tmp_path / "x", check=False)
    assert proc.returncode == 1 and "model.safetensors" in proc.stderr
    data = (path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 2])
    proc = run_tool("logits", "--model", tmp_path, "--tokens", "1", "--out", tmp_path / "x", check=False)
    assert proc.returncode == 1 and "truncated" in proc.stderr, proc.stderr


def test_decode_attention_with_random_inputs_reaches_the_kernel_check_and_names_bad_arguments():
    """decode-attention --random --time (bench/policy/bench_fp8_attention.py's call) builds its
    e4m3 caches from the seed without files; on the CPU the kernel then does not run, a clear
    error. Rows that --positions does not match, or a block size that does not divide the
    capacity, are usage errors."""
    common = ["decode-attention", "--device", "cpu", "--dtype", "bfloat16", "--random", "--kv-heads", 2,
              "--heads", 14, "--head-dim", 64, "--capacity", 64, "--keys", 32, "--time", 3]
    proc = run_tool(*common, "--rows", 1, "--slots", 1, "--positions", 31, check=False)
    assert proc.returncode == 1 and "the kernel does not run here" in proc.stderr, proc.stderr
    proc = run_tool(*common, "--rows", 2, "--slots", 2, "--positions", 31, check=False)
    assert proc.returncode == 2 and "--positions names 1 rows, --rows is 2" in proc.stderr, proc.stderr
    proc = run_tool(*common, "--rows", 1, "--slots", 1, "--positions", 31, "--block-size", 48, check=False)
    assert proc.returncode == 2 and "--block-size 48 does not divide --capacity 64" in proc.stderr, proc.stderr


def test_boundary_chain_names_bad_arguments():
    """boundary-chain (bench/policy/bench_boundaries.py's call) times kernels on a GPU only; its
    arguments are checked first, each a usage error naming itself."""
    common = ["boundary-chain", "--time", 2]
    for args, message in [
        (["--mode", "kernels", "--bytes", 1024, "--device", "cpu"], "--device must be cuda, not cpu"),
        (["--mode", "waves", "--bytes", 1024], "--mode must be kernels or flags, not 'waves'"),
        (["--mode", "flags", "--bytes", 1000], "--bytes must be a positive multiple of 16, not 1000"),
        (["--mode", "flags", "--bytes", 1024, "--phases", 0], "--phases must be 1..4096, not 0"),
        (["--mode", "kernels", "--bytes", 1024, "--blocks", -1], "--blocks must be >= 0, not -1"),
    ]:
        proc = run_tool(*common, *args, check=False)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)


def test_linear_rows_with_random_inputs_reaches_the_kernel_check_and_names_bad_arguments():
    """linear-rows --random --time (bench/policy/bench_gemv.py's call) makes its inputs from the
    seed without files; on the CPU the kernel then does not run, a clear error. --cublas without
    --time or with --norm, --cublas off CUDA, and bad sizes or copies are usage errors."""
    common = ["linear-rows", "--device", "cpu", "--dtype", "bfloat16", "--random", "--in", 896,
              "--out-features", 1152, "--time", 3]
    proc = run_tool(*common, "--rows", 1, "--norm", "--delta", "--bias", "--copies", 4, check=False)
    assert proc.returncode == 1 and "the matrix-vector kernel does not run here" in proc.stderr, proc.stderr
    proc = run_tool(*common, "--rows", 64, "--cublas", check=False)
    assert proc.returncode == 2 and "--device must be cuda, not cpu" in proc.stderr, proc.stderr
    proc = run_tool(*common, "--rows", 64, "--cublas", "--norm", check=False)
    assert proc.returncode == 2 and "neither --norm nor --silu" in proc.stderr, proc.stderr
    proc = run_tool(*common[:-2], "--rows", 64, "--cublas", check=False)
    assert proc.returncode == 2 and "it takes --time N" in proc.stderr, proc.stderr
    proc = run_tool(*common, "--rows", 0, check=False)
    assert proc.returncode == 2 and "must be at least 1" in proc.stderr, proc.stderr
    proc = run_tool(*common, "--rows", 1, "--copies", 0, check=False)
    assert proc.returncode == 2 and "--copies must be 1 to 4,096, not 0" in proc.stderr, proc.stderr


def test_linear_rows_cublaslt_names_what_it_needs():
    """linear-rows --cublaslt K (bench_gemv.py --cublaslt): K of 1-64, with --time, in 16 bits and
    without the fused kernels' flags, on CUDA; each refusal a usage error naming what is wrong."""
    common = ["linear-rows", "--dtype", "bfloat16", "--random", "--rows", 64, "--in", 896, "--out-features", 896]
    needs = "--cublaslt K (1-64) times cuBLASLt's candidates"
    for extra in (["--time", 3, "--cublaslt", 0], ["--time", 3, "--cublaslt", 65], ["--cublaslt", 4],
                  ["--time", 3, "--cublaslt", 4, "--silu"], ["--time", 3, "--cublaslt", 4, "--mma"]):
        proc = run_tool(*common, "--device", "cuda", *extra, check=False)
        assert proc.returncode == 2 and needs in proc.stderr, (extra, proc.stderr)
    proc = run_tool(*[c if c != "bfloat16" else "float32" for c in common], "--time", 3, "--cublaslt", 4,
                    check=False)
    assert proc.returncode == 2 and needs in proc.stderr, proc.stderr
    proc = run_tool(*common, "--device", "cpu", "--time", 3, "--cublaslt", 4, check=False)
    assert proc.returncode == 2 and "--cublaslt times CUDA kernels: --device must be cuda, not cpu" in proc.stderr


def test_linear_rows_mma_launch_names_what_it_takes():
    """linear-rows --mma-launch FW,S (bench_gemv.py --mma-launch): FW 1, 2, 4 or 8 and S 1-8, as two
    numbers and a comma; anything else a usage error naming the flag and the value given."""
    common = ["linear-rows", "--dtype", "bfloat16", "--random", "--rows", 64, "--in", 896, "--out-features", 896,
              "--mma", "--device", "cuda"]
    for value in ("3,2", "2,9", "2,0", "2", "x,y", "0,0"):
        proc = run_tool(*common, "--mma-launch", value, check=False)
        assert proc.returncode == 2, (value, proc.stderr)
        assert f"--mma-launch must be FW,S with FW 1, 2, 4 or 8 and S 1-8, not '{value}'" in proc.stderr, proc.stderr


def test_prompt_longer_than_context_is_rejected(models):
    path, _ = models["qwen2"]
    proc = run_tool("generate", "--model", path, "--prompts", ids(range(300)), check=False)
    assert proc.returncode == 1 and "does not fit the context" in proc.stderr


def test_agent_bench_profiles_the_steps_after_a_turn_and_counts_the_hosts_prefill_time(models, tmp_path):
    """agent-bench --profile: the steps after every episode finished turn J under the profiler (the
    next turn's prompts prefilled over their cached keys), with the passes among them; the run's
    summary counts the host's time in prefill passes (the CPU's compute here) and no wait for a
    device. A turn outside 1..T-1 is refused by name."""
    path, _ = models["qwen2"]
    profile = tmp_path / "profile.json"
    common = ["agent-bench", "--model", path, "--vocab", VOCAB, "--episodes", 3, "--turns", 3, "--system", 40,
              "--obs", 20, "--reply", 8, "--max-batch", 2, "--max-context", 256]
    proc = run_tool(*common, "--profile", profile, "--profile-after-turn", 1, "--profile-steps", 5)
    summary = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("{")))
    assert summary["prefill_passes"] > 0 and summary["prefill_host_seconds"] > 0
    assert summary["wait_seconds"] == 0
    # Every engine counter is printed (engine.hpp for_each_stat), a few under their short names.
    for key in ("admissions", "prefix_hits", "invalidations", "kv_blocks_kept", "prefilled", "decoded", "block_runs"):
        assert key in summary, key
    window = json.loads(profile.read_text())
    assert window["steps"] == 5 and window["prefill_passes"] >= 1 and window["prefilled_tokens"] >= 20
    assert window["prefill_passes"] <= summary["prefill_passes"]
    assert window["wall_us_per_step"] > 0 and window["device_events_per_step"] == 0  # the CPU: no kernels
    for turn in (0, 3):
        bad = run_tool(*common, "--profile", profile, "--profile-after-turn", turn, check=False)
        assert bad.returncode == 2 and "--profile needs --profile-after-turn in [1, --turns - 1]" in bad.stderr


@pytest.mark.parametrize("overlap", [False, True], ids=["plain", "overlap"])
def test_agent_bench_step_times_add_up_to_the_engines_counters(models, overlap):
    """agent-bench's step_times (each step() call's wall time by what the step did, which
    bench_agent.py step_split reads): its classes hold every step's decoded rows, attended keys
    and prefilled tokens, and no more seconds than the run took."""
    path, _ = models["qwen2"]
    proc = run_tool("agent-bench", "--model", path, "--vocab", VOCAB, "--episodes", 3, "--turns", 3, "--system", 40,
                    "--obs", 20, "--reply", 8, "--max-batch", 2, "--max-context", 256, "--prefill-chunk", 32,
                    *(["--overlap"] if overlap else []))
    summary = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("{")))
    times = summary["step_times"]
    classes = [times[k] for k in ("decode_only", "prefilling", "other")]
    assert sum(c["keys"] for c in classes) == summary["attended_keys"]
    assert sum(c["rows"] for c in classes) == summary["decoded"]
    assert times["prefilling"]["tokens"] == summary["prefilled"] and times["decode_only"]["tokens"] == 0
    assert times["decode_only"]["steps"] <= summary["decode_steps"] <= \
        times["decode_only"]["steps"] + times["prefilling"]["steps"]
    assert times["decode_only"]["steps"] > 0 and times["prefilling"]["steps"] > 0
    assert 0 < sum(c["seconds"] for c in classes) <= summary["seconds"]
    for c in classes:
        assert c["keys_sq"] >= c["keys"] ** 2 / max(c["steps"], 1) - 1e-6 * max(c["keys_sq"], 1)
