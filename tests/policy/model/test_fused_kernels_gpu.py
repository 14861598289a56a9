"""The decoder's fused CUDA kernels (policy/model/fused_ops.hpp) against transformers and against the
ATen composites they replace (marker gpu: the device machine only).

- fp32 on the GPU, kernels on: logits of a forward pass (residual add + RMSNorm) and greedy
  generation through the engine (also SiLU x up and a decode step's RoPE + KV write) match
  transformers for Llama, Qwen2 and Qwen3 (whose q/k norm keeps the composite RoPE).
- Sampling in one kernel (sample_rows): at temperature 0.7 on the GPU in fp32, every sampled
  token's logprob is transformers' log softmax(logits / 0.7) there; sampled conversations in fp32
  (same seeds, so the same uniforms) draw the same tokens with kernels on and off.
- bf16 flash with CUDA graphs over a multi-turn conversation with eviction: kernels on and off
  give the same tokens and logprobs to bf16 rounding; the build must have the kernels.
"""
import json

import numpy as np
import pytest
import torch

from near_ties import agree_to_near_ties, conversation, first_difference
from test_policy_model import FAMILIES, LOGIT_TOL, VOCAB, cpp_floats, ids, models, run_tool, sharp_qwen2  # noqa: F401

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.gpu

# Rationale: fp32 on the GPU differs from transformers on the CPU by summation order in GEMMs and
# reductions (cuBLAS, not TF32); 1e-3 is 10x the CPU test's tolerance and far below any wrong op.
GPU_FP32_TOL = 10 * LOGIT_TOL


@pytest.mark.parametrize("family", FAMILIES)
def test_fused_forward_logits_match_transformers_in_fp32(cuda, models, family, tmp_path):
    path, model = models[family]
    tokens = [5, 17, 300, 2, 99, 511, 0, 42, 42, 7, 250, 128]
    got = cpp_floats(tmp_path, "logits", "--model", path, "--device", "cuda", "--tokens", ids(tokens))
    off = cpp_floats(tmp_path, "logits", "--model", path, "--device", "cuda", "--tokens", ids(tokens),
                     "--no-fused-kernels")
    with torch.no_grad():
        want = model(torch.tensor([tokens])).logits[0].numpy()
    assert np.abs(got.reshape(len(tokens), VOCAB) - want).max() < GPU_FP32_TOL
    assert np.abs(off.reshape(len(tokens), VOCAB) - want).max() < GPU_FP32_TOL


@pytest.mark.parametrize("family", FAMILIES)
def test_fused_greedy_decode_matches_transformers_in_fp32(cuda, models, family):
    path, model = models[family]
    prompts = [[3, 1, 4, 1, 5], [9, 2, 6, 5, 3, 5, 8, 9, 7], [271]]
    proc = run_tool("generate", "--model", path, "--device", "cuda", "--prompts", ";".join(ids(p) for p in prompts),
                    "--max-new-tokens", 10, "--temperature", 0, "--max-batch", 2, "--cache-attention", "sdpa")
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == len(prompts)
    for prompt, result in zip(prompts, results):
        with torch.no_grad():
            out = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=10, min_new_tokens=10,
                                 pad_token_id=0, output_logits=True, return_dict_in_generate=True)
        want = out.sequences[0, len(prompt):].tolist()
        assert result["tokens"] == want
        want_logp = [torch.log_softmax(l[0], -1)[t].item() for l, t in zip(out.logits, want)]
        assert np.allclose(result["logprobs"], want_logp, atol=GPU_FP32_TOL)


def test_fused_sampling_logprobs_are_transformers_temperature_scaled_logprobs(cuda, models):
    path, model = models["qwen2"]
    prompt, temperature = [7, 8, 9], 0.7
    proc = run_tool("generate", "--model", path, "--device", "cuda", "--prompts", ids(prompt), "--max-new-tokens", 12,
                    "--temperature", temperature, "--seed", 5, "--cache-attention", "sdpa")
    result = json.loads(proc.stdout.splitlines()[0])
    tokens = result["tokens"]
    assert len(tokens) == 12
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1:-1]
    want = torch.log_softmax(logits / temperature, -1).gather(1, torch.tensor(tokens)[:, None])[:, 0]
    assert np.allclose(result["logprobs"], want.numpy(), atol=GPU_FP32_TOL)


def test_fused_kernels_agree_with_the_composites_in_bf16_over_a_conversation(cuda, tmp_path):
    sharp_qwen2(tmp_path)
    on, on_summary = conversation(tmp_path, fused=True)
    off, _ = conversation(tmp_path, fused=False)
    assert on_summary["fused_kernels_built"] is True, "this CUDA build lacks the fused kernels (nvcc not found?)"
    assert on_summary["graph_captures"] > 0 and on_summary["evictions"] > 0
    assert len(on) == len(off) == 5 * 4
    # The kernels sum the RMSNorm's squares and the sampler's weights in another order, which moves
    # a bf16 rounding now and then; greedy replies may then part at a near tie. How often one comes
    # is the model's (the H200: 1 of 5 episodes in one run, 4 of 5 in another), so the partings are
    # not counted; a quarter of the tokens must still be compared, so replies that part at once
    # everywhere fail.
    compared, generated = agree_to_near_ties(on, off)
    assert compared >= generated // 4, (compared, generated)


def test_fused_sampling_draws_the_composites_tokens_in_fp32(cuda, tmp_path):
    sharp_qwen2(tmp_path)
    on, on_summary = conversation(tmp_path, fused=True, dtype="float32", mode="sdpa", temperature=1)
    off, _ = conversation(tmp_path, fused=False, dtype="float32", mode="sdpa", temperature=1)
    assert on_summary["fused_kernels_built"] is True
    assert len(on) == len(off) == 5 * 4
    # Same seeds, same uniforms: a draw differs only where summation order moves the target
    # across a token's boundary (~1e-7 relative), not once in these 800 draws unless broken.
    for key in sorted(off):
        assert on[key]["tokens"] == off[key]["tokens"], key
        assert max(abs(a - b) for a, b in zip(on[key]["logprobs"], off[key]["logprobs"])) < 1e-3, key


def test_fused_sampling_over_a_full_vocabulary_draws_what_the_float64_rule_draws(cuda, tmp_path):
    """sample_rows over Qwen2's 151,936 entries, where each warp's segment is walked 32 entries at a
    time (about 149 tiles), against the rule in float64: the first entry whose running sum of
    exp(z - max) passes u * total, never a zero weight; greedy rows the first argmax; forced rows
    their token. Logprobs are log softmax(logits / T) of the drawn token."""
    b, v = 256, 151936
    g = torch.Generator().manual_seed(11)
    logits = torch.randn(b, v, generator=g) * torch.linspace(0.5, 6.0, b)[:, None]  # flat to sharp rows
    temperature = torch.tensor([0.7, 1.0, 1.3, 2.0]).repeat(b // 4)
    uniform = torch.rand(b, generator=g, dtype=torch.float64).float()
    uniform[0], uniform[1] = 0.0, float(np.nextafter(np.float32(1), np.float32(0)))  # the ends of [0, 1)
    logits[2, : v // 2] = -float("inf")  # zero weights before the first entry that can be drawn
    uniform[2] = 0.0
    greedy = torch.zeros(b)
    greedy[5::16] = 1
    logits[5, 1000] = logits[5, 90000] = logits[5].max() + 1  # a tie: the first index wins
    forced = torch.full((b,), -1.0)
    forced[7::32] = torch.arange(7, b, 32, dtype=torch.float32) * 311
    temperature[greedy == 1] = 1.0
    logits_path, params_path, out_path = tmp_path / "logits.f32", tmp_path / "params.f32", tmp_path / "out.f32"
    logits.numpy().astype("<f4").tofile(logits_path)
    torch.cat([temperature, uniform, greedy, forced]).numpy().astype("<f4").tofile(params_path)
    run_tool("sample", "--device", "cuda", "--rows", b, "--vocab", v, "--logits", logits_path, "--params",
             params_path, "--out", out_path)
    got = np.fromfile(out_path, dtype="<f4").reshape(2, b)
    tokens, logprobs = got[0].astype(np.int64), got[1]

    z = logits.double() / temperature.double()[:, None]
    p = torch.exp(z - z.max(1, keepdim=True).values)
    cum = p.cumsum(1)
    target = uniform.double() * cum[:, -1]
    drawn = torch.searchsorted(cum, target[:, None], right=True)[:, 0]
    want = torch.where(greedy == 1, logits.argmax(1), drawn)
    want = torch.where(forced >= 0, forced.long(), want).numpy()
    assert want[2] == v // 2 and want[5] == 1000
    # fp32 running sums may move a draw whose target lies within rounding of an entry's edge.
    differ = np.nonzero(tokens != want)[0]
    for row in differ:
        edge = cum[row, min(tokens[row], want[row])].item()
        assert abs(edge - target[row].item()) < 1e-5 * cum[row, -1].item(), (row, tokens[row], want[row])
    assert len(differ) <= 2, differ
    assert (tokens[greedy.numpy() == 1] == want[greedy.numpy() == 1]).all()
    assert (tokens[forced.numpy() >= 0] == want[forced.numpy() >= 0]).all()
    ref = torch.log_softmax(z, 1).gather(1, torch.from_numpy(tokens)[:, None])[:, 0].numpy()
    assert np.allclose(logprobs, ref, atol=1e-4)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_fused_sampling_reads_half_logits_as_their_fp32_copy(cuda, tmp_path, dtype):
    """The decode step hands sample_rows the LM head's bf16 / fp16 logits (no fp32 copy of the
    vocabulary): every token and logprob equals, bit for bit, what the kernels give on the fp32
    copy of those rounded logits."""
    b, v = 64, 151936
    g = torch.Generator().manual_seed(5)
    logits = (torch.randn(b, v, generator=g) * torch.linspace(0.5, 6.0, b)[:, None]).to(getattr(torch, dtype))
    temperature = torch.tensor([0.7, 1.0, 1.3, 2.0]).repeat(b // 4)
    uniform = torch.rand(b, generator=g, dtype=torch.float64).float()
    greedy = torch.zeros(b)
    greedy[3::8] = 1
    temperature[greedy == 1] = 1.0
    forced = torch.full((b,), -1.0)
    forced[6::16] = 4242.0
    params_path = tmp_path / "params.f32"
    torch.cat([temperature, uniform, greedy, forced]).numpy().astype("<f4").tofile(params_path)
    rounded_path = tmp_path / "logits.f32"
    logits.float().numpy().astype("<f4").tofile(rounded_path)  # exact: every half value is an fp32 value
    got = {}
    for logits_dtype in ["float32", dtype]:
        out = tmp_path / f"out-{logits_dtype}.f32"
        run_tool("sample", "--device", "cuda", "--rows", b, "--vocab", v, "--logits", rounded_path, "--params",
                 params_path, "--out", out, "--logits-dtype", logits_dtype)
        got[logits_dtype] = np.fromfile(out, dtype="<f4").reshape(2, b)
    assert np.array_equal(got["float32"], got[dtype])
    tokens = got[dtype][0].astype(np.int64)
    assert (tokens[forced.numpy() >= 0] == 4242).all()
    assert (tokens[greedy.numpy() == 1] == logits.float().argmax(1).numpy()[greedy.numpy() == 1]).all()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_linear_rows_kernel_is_the_float64_product_rounded_once(cuda, tmp_path, dtype):
    """linear_rows' matrix-vector kernel (1-8 rows) over the 0.5B decode shapes (q/k/v 1152 x 896,
    down 896 x 4864, gate/up 9728 x 896), a tiny one (13 x 24: fewer vectors than lanes, a
    partial block), and outputs split over 2-8 warps a feature (few features, a long input:
    1150 x 896 ends in a partial block of split features, 13 x 4096 has 8 warps a feature): y
    equals the float64 product of the rounded operands plus the bias, to one rounding of the dtype
    plus fp32 summation error."""
    torch_dtype = getattr(torch, dtype)
    rel = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11, "float32": 2.0 ** -23}[dtype]
    g = torch.Generator().manual_seed(9)
    for rows, n, d, with_bias in [(1, 1152, 896, True), (3, 896, 4864, False), (8, 9728, 896, False),
                                  (5, 13, 24, True), (2, 13, 24, False), (1, 1150, 896, True),
                                  (2, 13, 4096, True)]:
        x = torch.randn(rows, d, generator=g).to(torch_dtype).double()
        w = (torch.randn(n, d, generator=g) * 0.05).to(torch_dtype).double()
        bias = torch.randn(n, generator=g).to(torch_dtype).double()
        for name, t in [("x", x), ("w", w), ("bias", bias)]:
            t.float().numpy().astype("<f4").tofile(tmp_path / f"{name}.f32")
        out = tmp_path / "y.f32"
        run_tool("linear-rows", "--device", "cuda", "--dtype", dtype, "--rows", rows, "--in", d, "--out-features", n,
                 "--x", tmp_path / "x.f32", "--w", tmp_path / "w.f32", *(["--bias", tmp_path / "bias.f32"]
                                                                         if with_bias else []), "--out", out)
        got = torch.from_numpy(np.fromfile(out, dtype="<f4").reshape(rows, n)).double()
        want = x @ w.T + (bias if with_bias else 0)
        scale = x.abs() @ w.abs().T
        err = (got - want).abs() - (rel * want.abs() + 2e-5 * scale + 1e-30)
        assert err.max().item() <= 0, (rows, n, d, (got - want).abs().max().item())


def random_flags(tmp_path, torch_dtype, g):
    """floats(name, *shape, scale=1): random values of that shape rounded to torch_dtype, written
    as fp32 to tmp_path; returns the tool's flags ["--name", file]."""
    def floats(name, *shape, scale=1.0):
        t = (torch.randn(*shape, generator=g) * scale).to(torch_dtype).float()
        t.numpy().astype("<f4").tofile(tmp_path / f"{name}.f32")
        return ["--" + name, tmp_path / f"{name}.f32"]
    return floats


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_gemv_with_the_norm_before_and_silu_after_gives_the_bits_of_the_kernels_one_by_one(cuda, tmp_path, dtype):
    """add_rms_norm_linear (every block norms the rows into shared memory before its share of the
    product) and linear_silu_mul (a block's warps pair gate and up features and write silu(gate) *
    up), alone and together, against add_rms_norm, the matrix-vector kernel and silu_mul one by one:
    the same bits, outputs and sums. The 0.5B decode shapes (the norm before q/k/v 1152 x 896, the
    norm and silu around gate/up 9728 x 896), Qwen2.5-7B's norm (d 3584), tiny ones (fewer vectors
    than lanes, partial blocks, an odd count of pairs), with and without a delta and a bias, 1-8
    rows."""
    floats = random_flags(tmp_path, getattr(torch, dtype), torch.Generator().manual_seed(13))
    cases = [  # rows, n, d, norm, delta, silu, bias
        (1, 1152, 896, True, True, False, True), (8, 1152, 896, True, True, False, True),
        (1, 9728, 896, True, True, True, False), (3, 9728, 896, True, True, True, False),
        (8, 9728, 896, False, False, True, False), (2, 13, 24, True, False, False, True),
        (5, 26, 24, True, True, True, True), (4, 10, 24, False, False, True, True),
        (2, 3000, 128, False, False, True, False)]
    if dtype != "float32":
        cases.append((2, 512, 3584, True, True, False, True))
    for rows, n, d, norm, delta, silu, bias in cases:
        args = [*floats("x", rows, d, scale=4), *floats("w", n, d, scale=0.05),
                *(floats("norm", d) if norm else []), *(floats("delta", rows, d) if delta else []),
                *(floats("bias", n) if bias else []), *(["--silu"] if silu else [])]
        out = tmp_path / "y.f32"
        run_tool("linear-rows", "--device", "cuda", "--dtype", dtype, "--rows", rows, "--in", d, "--out-features", n,
                 "--eps", 1e-6, *args, "--out", out)
        parts = np.fromfile(out, dtype="<f4")
        m = rows * (n // 2 if silu else n)
        case = (dtype, rows, n, d, norm, delta, silu)
        assert parts.size == 2 * m + (2 * rows * d if delta else 0), case
        assert np.array_equal(parts[:m], parts[m:2 * m]), (case, np.abs(parts[:m] - parts[m:2 * m]).max())
        if delta:
            assert np.array_equal(parts[2 * m:2 * m + rows * d], parts[2 * m + rows * d:]), case


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_gemv_with_rope_and_the_kv_write_gives_the_bits_of_the_kernels_one_by_one(cuda, tmp_path, dtype):
    """add_rms_norm_qkv_rope_kv (a block's warps pair entries i and i + e/2 of a head; the second
    rotates both and writes q, or k and v into the cache) against add_rms_norm_linear then
    rope_kv_decode: the same bits in q, both caches and the sums. The 0.5B shape (14 + 2 x 2 heads
    of 64), Qwen2.5-7B's (28 + 2 x 4 heads of 128, d 3584), a tiny one (heads of 8), 1-8 rows at
    scattered positions, with and without a delta; bf16 and fp16 also into e4m3 caches."""
    floats = random_flags(tmp_path, getattr(torch, dtype), torch.Generator().manual_seed(17))
    cases = [  # rows, h, k, e, d, delta, positions
        (1, 14, 2, 64, 896, True, [20000]), (8, 14, 2, 64, 896, True, [0, 5, 9, 100, 7, 3000, 64, 1]),
        (3, 2, 1, 8, 24, False, [4, 0, 11])]
    if dtype != "float32":
        cases.append((2, 28, 4, 128, 3584, True, [17, 2047]))
    for rows, h, k, e, d, delta, positions in cases:
        for fp8 in [False, True] if dtype != "float32" else [False]:
            n = (h + 2 * k) * e
            args = [*floats("x", rows, d, scale=4), *floats("w", n, d, scale=0.05), *floats("norm", d),
                    *(floats("delta", rows, d) if delta else []), *floats("bias", n),
                    *(["--fp8-cache"] if fp8 else [])]
            out = tmp_path / "y.f32"
            run_tool("linear-rows", "--device", "cuda", "--dtype", dtype, "--rows", rows, "--in", d,
                     "--out-features", n, "--eps", 1e-6, "--rope-heads", f"{h},{k}",
                     "--positions", ",".join(map(str, positions)), *args, "--out", out)
            parts = np.fromfile(out, dtype="<f4")
            cache = rows * k * (max(positions) + 1) * e
            sizes = [rows * h * e] * 2 + [cache] * 4 + ([rows * d] * 2 if delta else [])
            case = (dtype, rows, h, k, e, d, delta, fp8)
            assert parts.size == sum(sizes), case
            chunks = np.split(parts, np.cumsum(sizes)[:-1])
            for name, one, two in zip(["q", "k cache", "v cache", "sum"], chunks[0::2], chunks[1::2]):
                assert np.array_equal(one, two), (case, name, np.abs(one - two).max())
            # Every row wrote its key and value: the caches are not all zeros at the positions.
            k_cache = chunks[2].reshape(rows, k, max(positions) + 1, e)
            for r, p in enumerate(positions):
                assert np.abs(k_cache[r, :, p]).sum() > 0, (case, r, p)


def test_decode_gemv_rows_decode_what_cublas_decodes(cuda, tmp_path):
    """Conversations decoded 2 rows at a time with the projections as matrix-vector kernels
    (--decode-gemv-rows 2) against cuBLAS: in fp32 (sdpa) the same greedy tokens and logprobs within
    1e-3; in bf16 (flash, CUDA graphs) the same up to near ties."""
    sharp_qwen2(tmp_path)
    gemv = ["--decode-gemv-rows", 2]
    on, _ = conversation(tmp_path, fused=True, dtype="float32", mode="sdpa", extra=gemv)
    off, _ = conversation(tmp_path, fused=True, dtype="float32", mode="sdpa")
    assert len(on) == len(off) == 5 * 4
    for key in sorted(off):
        assert on[key]["tokens"] == off[key]["tokens"], key
        assert max(abs(a - b) for a, b in zip(on[key]["logprobs"], off[key]["logprobs"])) < 1e-3, key
    on, summary = conversation(tmp_path, fused=True, extra=gemv)
    off, _ = conversation(tmp_path, fused=True)
    assert summary["graph_captures"] > 0
    compared, generated = agree_to_near_ties(on, off)
    assert compared >= generated // 4, (compared, generated)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mma_rows_kernel_is_the_float64_product_rounded_once(cuda, tmp_path, dtype):
    """linear_rows' tensor-core kernel (mma_rows, 1-64 rows) over the 0.5B decode shapes at 64 rows
    (q/k/v 1152 x 896, o 896 x 896, down 896 x 4864, gate/up 9728 x 896) on its own launch and on
    forced ones (warps along the features 1-8, d in 1-8 shares: a cluster's), partial tiles of rows
    and features, a d that is no multiple of a group (24, 904), shares with no group (d of one
    group in 8 shares) and one row: y equals the float64 product of the rounded operands plus the
    bias, to one rounding of the dtype plus fp32 summation error. With --silu, its SwiGLU form gives
    the bits of the plain kernel then silu_mul."""
    torch_dtype = getattr(torch, dtype)
    rel = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}[dtype]
    g = torch.Generator().manual_seed(21)
    for rows, n, d, with_bias, launches in [
            (64, 1152, 896, True, [None, "1,1", "2,7", "8,2"]), (64, 896, 896, False, [None, "4,4"]),
            (64, 896, 4864, False, [None, "1,5", "8,8"]), (64, 9728, 896, False, [None, "2,1", "8,3"]),
            (9, 13, 24, True, [None, "2,8"]), (33, 1150, 904, True, [None, "4,5"]), (17, 40, 64, False, [None]),
            (1, 96, 128, True, [None, "1,2"]), (56, 3000, 128, False, [None])]:
        x = torch.randn(rows, d, generator=g).to(torch_dtype).double()
        w = (torch.randn(n, d, generator=g) * 0.05).to(torch_dtype).double()
        bias = torch.randn(n, generator=g).to(torch_dtype).double()
        for name, t in [("x", x), ("w", w), ("bias", bias)]:
            t.float().numpy().astype("<f4").tofile(tmp_path / f"{name}.f32")
        files = ["--x", tmp_path / "x.f32", "--w", tmp_path / "w.f32",
                 *(["--bias", tmp_path / "bias.f32"] if with_bias else [])]
        out = tmp_path / "y.f32"
        want = x @ w.T + (bias if with_bias else 0)
        scale = x.abs() @ w.abs().T
        for launch in launches:
            forced = ["--mma-launch", launch] if launch else []
            run_tool("linear-rows", "--mma", *forced, "--device", "cuda", "--dtype", dtype, "--rows", rows, "--in",
                     d, "--out-features", n, *files, "--out", out)
            got = torch.from_numpy(np.fromfile(out, dtype="<f4").reshape(rows, n)).double()
            err = (got - want).abs() - (rel * want.abs() + 2e-5 * scale + 1e-30)
            assert err.max().item() <= 0, (rows, n, d, launch, (got - want).abs().max().item())
            if n % 2 == 0:
                run_tool("linear-rows", "--mma", *forced, "--silu", "--device", "cuda", "--dtype", dtype, "--rows",
                         rows, "--in", d, "--out-features", n, *files, "--out", out)
                parts = np.fromfile(out, dtype="<f4")
                m = rows * n // 2
                assert parts.size == 2 * m
                assert np.array_equal(parts[:m], parts[m:]), (rows, n, d, launch, np.abs(parts[:m] - parts[m:]).max())


@pytest.mark.parametrize("n,d,bias", [(1152, 896, True), (896, 4864, False)], ids=["qkv-bias", "down"])
def test_cublaslt_candidates_compute_torch_linears_product(cuda, n, d, bias):
    """linear-rows --cublaslt K at 64 rows (bench_gemv.py --cublaslt): torch::linear's line first,
    then at least one of cuBLASLt's candidates, each timed with its kernels named and its output
    within bf16 rounding of torch::linear's (outputs of unit variance: a few spacings of 2^-6 at
    most; a wrong layout or a dropped bias is off by ~1)."""
    proc = run_tool("linear-rows", "--random", "--device", "cuda", "--dtype", "bfloat16", "--rows", 64, "--in", d,
                    "--out-features", n, *(["--bias"] if bias else []), "--time", 3, "--cublaslt", 8)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert lines[0]["candidate"] == -1 and lines[0]["kernel_us"] > 0 and lines[0]["kernels"], lines[0]
    candidates = lines[1:]
    assert 1 <= len(candidates) <= 8 and [c["candidate"] for c in candidates] == list(range(len(candidates)))
    for c in candidates:
        assert "error" not in c, c
        assert c["kernel_us"] > 0 and c["kernels"] and c["kernels_a_call"] >= 1, c
        assert c["max_abs_diff"] <= 0.1, c


def test_mma_rows_timing_reports_its_launch(cuda):
    """linear-rows --mma --time N reports the kernel's launch beside its time: gate/up at 64 rows
    (SwiGLU: 304 warp tiles of 16 pairs, `feature_warps` of them a block), d cut into at most the
    cap's shares, and how many clusters the device runs at once (at least one); --mma-launch FW,S
    is the launch reported."""
    for cap in (1, 8):
        proc = run_tool("linear-rows", "--mma", "--silu", "--random", "--device", "cuda", "--dtype", "bfloat16",
                        "--rows", 64, "--in", 896, "--out-features", 9728, "--time", 3, "--mma-shares", cap)
        line = json.loads([x for x in proc.stdout.splitlines() if x.startswith("{")][-1])
        assert line["feature_warps"] in (1, 2, 4, 8) and line["tiles"] == -(-304 // line["feature_warps"]), line
        assert 1 <= line["shares"] <= cap, line
        assert line["blocks_per_sm"] >= 1 and line["clusters_at_once"] >= 1, line
    proc = run_tool("linear-rows", "--mma", "--silu", "--random", "--device", "cuda", "--dtype", "bfloat16",
                    "--rows", 64, "--in", 896, "--out-features", 9728, "--time", 3, "--mma-launch", "2,7")
    line = json.loads([x for x in proc.stdout.splitlines() if x.startswith("{")][-1])
    assert (line["feature_warps"], line["tiles"], line["shares"]) == (2, 152, 7), line


def test_decode_mma_rows_decode_what_cublas_decodes(cuda, tmp_path):
    """Conversations decoded 2 rows at a time with the projections as tensor-core kernels
    (--decode-mma-rows 64; one row stays on the matrix-vector kernel) against cuBLAS, in bf16 (flash,
    CUDA graphs): the same up to near ties. With and without programmatic launch (the first weights
    loaded before the wait, the shares' cluster), the same bits."""
    sharp_qwen2(tmp_path)
    mma = ["--decode-mma-rows", 64]
    on, summary = conversation(tmp_path, fused=True, extra=mma)
    off, _ = conversation(tmp_path, fused=True)
    assert summary["graph_captures"] > 0
    compared, generated = agree_to_near_ties(on, off)
    assert compared >= generated // 4, (compared, generated)
    plain, _ = conversation(tmp_path, fused=True, extra=[*mma, "--no-programmatic-launch"])
    assert plain == on, first_difference(plain, on)


@pytest.mark.parametrize("extra", [[], ["--kv-cache-dtype", "fp8_e4m3", "--kv-layout", "paged", "--kv-block-size", 64,
                                        "--kv-cache-tokens", 1536]],
                         ids=["bf16-slots", "e4m3-paged"])
def test_programmatic_launch_gives_the_same_bits(cuda, tmp_path, extra):
    """--programmatic-launch lets each fused kernel start during the tail of the kernel before it
    (and the matrix-vector kernels load their first weights before waiting): a conversation with
    CUDA graphs and evictions gives the same tokens and logprobs, bit for bit, as without it."""
    sharp_qwen2(tmp_path)
    on, summary = conversation(tmp_path, fused=True, extra=extra)  # on by default
    off, _ = conversation(tmp_path, fused=True, extra=["--no-programmatic-launch", *extra])
    assert summary["graph_captures"] > 0 and summary["evictions"] > 0
    assert on == off, first_difference(on, off)


def test_a_conversation_repeats_bit_for_bit(cuda, tmp_path):
    """The same greedy conversation (bf16 slots, CUDA graphs, evictions) run twice without
    programmatic launch and twice with it: four runs, the same bits. The test above compares one run
    of each; this one tells a run-to-run difference (a kernel or library that is not deterministic)
    from one that programmatic launch brings, by naming every run that differs from the first."""
    sharp_qwen2(tmp_path)
    runs = {}
    for name, extra in [("off-1", ["--no-programmatic-launch"]), ("off-2", ["--no-programmatic-launch"]),
                        ("on-1", []), ("on-2", [])]:
        runs[name], _ = conversation(tmp_path, fused=True, extra=extra)
    first = runs["off-1"]
    differ = {name: first_difference(first, replies) for name, replies in runs.items() if replies != first}
    assert not differ, f"against off-1: {differ}"
