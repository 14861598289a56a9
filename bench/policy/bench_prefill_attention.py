"""A prefill pass's attention over cached keys on a CUDA GPU: torch's flash against cuDNN's.

The cached agent workload's prefilling steps are ~20% of its time on the H200 (5.9 of 29.5 s,
bench/results/2026-12-07-policy-h200-done-when-rows.md), and most of their device work is the new
tokens' attention over their conversations' cached keys, which the engine runs through torch's
flash varlen forward (policy/model/decoder_flash.cpp `flash_varlen`). This times that call
alone at one pass of the workload's shape beside cuDNN's varlen forward
(`aten::_cudnn_attention_forward` with cumulative sequence lengths, torch's jagged-tensor
path), so whether cuDNN's kernel is worth wiring in is a number, not a guess.

The pass: PARTS conversations, each prefilling Q new tokens (a turn's observation and generation
prompt: the workload's 993,856 prefilled tokens over 1,920 admissions are 518 a turn) after
its cached keys (1,000 + 800 i for turn i, spread over the run's turns), 14 query heads over 2
KV heads, head_dim 64, bf16: queries [sum Q, 14, 64], keys and values [sum K, 2, 64], causal
from the bottom right (a new token sees every cached key and the new ones up to itself). Each
backend's output is checked against a float32 reference of two parts (explicit bottom-right
mask, GQA by repeating the KV heads), so a backend that aligns its causal mask another way is
reported as wrong, not timed as right. Times are CUDA-event means over --reps calls after
warm-up; TFLOP/s counts 4 x head_dim FLOPs a query-key pair the mask lets through. `new_shape_ms`:
a first call at a longest key length not seen before (the workload's passes each have their own),
which is where a backend that plans per shape pays for it.

Also timed, for the e4m3 cache's prefill (decoder_flash.cpp `gathered_flash_prefill`): the
keys and values gathered by row from the cache's bytes and converted to bf16 (what the engine
does before flash), against the same gather from a bf16 cache.

    python3 bench/policy/bench_prefill_attention.py [--parts 31] [--q 518] [--reps 20] [--out FILE]
"""
import argparse
import json
import sys

import torch


def lengths(parts, q, first=1000, per_turn=800, turns=30):
    """(query lengths, key lengths): part j at turn 1 + j * (turns - 1) // parts of the run."""
    qs, ks = [], []
    for j in range(parts):
        turn = 1 + j * (turns - 1) // max(parts - 1, 1) if parts > 1 else turns // 2
        cached = first + per_turn * (turn - 1)
        qs.append(q)
        ks.append(cached + q)
    return qs, ks


def cumulative(xs, device):
    return torch.tensor([0] + list(torch.tensor(xs).cumsum(0).tolist()), dtype=torch.int32, device=device)


def pairs(qs, ks):
    """Query-key pairs a bottom-right causal mask lets through."""
    return sum(q * (k - q) + q * (q + 1) // 2 for q, k in zip(qs, ks))


def reference(q, k, v, qs, ks, which, scale):
    """float32 attention of parts `which`, bottom-right causal, GQA by repeating KV heads."""
    out = []
    cq, ck = [0], [0]
    for a, b in zip(qs, ks):
        cq.append(cq[-1] + a)
        ck.append(ck[-1] + b)
    h, kh = q.shape[1], k.shape[1]
    for j in which:
        qj = q[cq[j]:cq[j + 1]].float().transpose(0, 1)  # [h, Q, e]
        kj = k[ck[j]:ck[j + 1]].float().repeat_interleave(h // kh, dim=1).transpose(0, 1)
        vj = v[ck[j]:ck[j + 1]].float().repeat_interleave(h // kh, dim=1).transpose(0, 1)
        nq, nk = qj.shape[1], kj.shape[1]
        allowed = torch.arange(nk, device=q.device)[None, :] <= (torch.arange(nq, device=q.device)[:, None] + nk - nq)
        s = (qj @ kj.transpose(1, 2)) * scale
        s = s.masked_fill(~allowed, float("-inf"))
        out.append((s.softmax(-1) @ vj).transpose(0, 1))
    return out


def flash(q, k, v, cu_q, cu_k, max_q, max_k, scale):
    return torch.ops.aten._flash_attention_forward(q, k, v, cu_q, cu_k, max_q, max_k, 0.0, True, False,
                                                   scale=scale)[0]


def cudnn(q, k, v, cu_q, cu_k, max_q, max_k, scale):
    return torch.ops.aten._cudnn_attention_forward(q, k, v, None, cu_q, cu_k, max_q, max_k, False, 0.0, True,
                                                   False, scale=scale)[0]


def event_ms(run, calls=1):
    """ms a call of `run` between CUDA events, from an idle device; the host's time before a
    launch (a plan built for a new shape) counts, as the device waits for it."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        run()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


def timed(fn, reps):
    for _ in range(3):
        fn()
    return event_ms(fn, reps)


def new_shapes(fn, q, k, v, qs, ks, scale, shapes=5):
    """Mean ms of a first call at a longest key length not seen before (the pass's last part cut by
    1..shapes keys): a backend that builds a plan per shape (cuDNN's graphs are cached by shape)
    pays for it on every pass whose longest conversation differs, as the workload's passes do."""
    times = []
    for cut in range(1, shapes + 1):
        ks2 = ks[:-1] + [ks[-1] - cut]
        cu_q, cu_k = cumulative(qs, q.device), cumulative(ks2, q.device)
        k2, v2 = k[:sum(ks2)], v[:sum(ks2)]
        times.append(event_ms(lambda: fn(q, k2, v2, cu_q, cu_k, max(qs), max(ks2), scale)))
    return sum(times) / len(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", type=int, default=31)
    ap.add_argument("--q", type=int, default=518)
    ap.add_argument("--heads", type=int, default=14)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_prefill_attention.py: needs a CUDA GPU")
    if a.parts < 1 or a.q < 1 or a.reps < 1 or a.heads % a.kv_heads:
        sys.exit("bench_prefill_attention.py: --parts, --q, --reps >= 1 and --heads a multiple of --kv-heads")
    dev = "cuda"
    torch.manual_seed(a.seed)
    qs, ks = lengths(a.parts, a.q)
    e, h, kh = a.head_dim, a.heads, a.kv_heads
    # Queries 3x the keys' spread: scores of ~3 standard deviations, so each query attends a few keys
    # and a misaligned mask moves its output by ~1, far past bf16's rounding.
    q = (3 * torch.randn(sum(qs), h, e, device=dev)).to(torch.bfloat16)
    k = torch.randn(sum(ks), kh, e, device=dev, dtype=torch.bfloat16)
    v = torch.randn(sum(ks), kh, e, device=dev, dtype=torch.bfloat16)
    cu_q, cu_k = cumulative(qs, dev), cumulative(ks, dev)
    scale = e ** -0.5
    flops = 4 * e * h * pairs(qs, ks)
    check = [0, a.parts - 1]
    ref = reference(q, k, v, qs, ks, check, scale)
    cq = cu_q.tolist()
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
              "parts": a.parts, "q_tokens": sum(qs), "k_tokens": sum(ks), "k_min": min(ks), "k_max": max(ks),
              "pairs": pairs(qs, ks), "backends": {}}
    for name, fn in (("flash", flash), ("cudnn", cudnn)):
        row = {}
        try:
            out = fn(q, k, v, cu_q, cu_k, max(qs), max(ks), scale)
            err = max((out[cq[j]:cq[j + 1]].float() - r).abs().max().item() for j, r in zip(check, ref))
            row["max_abs_error_vs_fp32"] = err
            row["right"] = err < 0.03
            if row["right"]:
                ms = timed(lambda: fn(q, k, v, cu_q, cu_k, max(qs), max(ks), scale), a.reps)
                row["ms"] = ms
                row["tflops"] = flops / ms / 1e9
                row["new_shape_ms"] = new_shapes(fn, q, k, v, qs, ks, scale)
        except Exception as exc:  # a backend this torch or card does not have: reported, not fatal
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        result["backends"][name] = row
        print(f"{name}: {row}", flush=True)
    # The e4m3 cache's gather and conversion before flash, against a bf16 cache's gather.
    rows = torch.randperm(sum(ks) * 4, device=dev)[:sum(ks)]
    cache8 = torch.randint(0, 256, (sum(ks) * 4, kh * e), device=dev, dtype=torch.uint8)
    cache8 = cache8 & 0x7e  # no NaN bytes
    cache16 = torch.randn(sum(ks) * 4, kh * e, device=dev, dtype=torch.bfloat16)
    gather8 = timed(lambda: cache8.index_select(0, rows).view(torch.float8_e4m3fn).to(torch.bfloat16), a.reps)
    gather16 = timed(lambda: cache16.index_select(0, rows), a.reps)
    result["gather_convert_e4m3_ms"] = gather8
    result["gather_bf16_ms"] = gather16
    print(f"gather a pass's keys (one of K, V): e4m3 + convert {gather8:.3f} ms, bf16 {gather16:.3f} ms", flush=True)
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
