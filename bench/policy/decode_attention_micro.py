#!/usr/bin/env python3
"""Decode attention over the engine's slot cache on a CUDA GPU: correctness and time of the options.

The cache is laid out as the engine keeps it, [slots, KV heads, capacity, head_dim] per layer;
each of `rows` decode rows attends with 14 query heads (2 KV heads, Qwen2-0.5B) over its own used
keys. Options, as policy/model/decoder_cache.cpp and decoder_flash.cpp run them:
  sdpa    one masked scaled_dot_product_attention call over the first max-used keys;
  matmul  two batched matrix products with fp32 scores and a masked softmax between;
  flash   aten::_flash_attention_forward, variable-length form over the cache in place (one
          sequence per (row, KV head), seqused_k = the row's used keys), no copy, split-K.
Also the prefill of t new tokens after a cached prefix (flash, causal from the bottom right) against
the masked SDPA with keys repeated per head. Each result is checked against an fp32 reference
(relative error), each time is the median of CUDA-graph replays, and each is set beside the
bandwidth bound of the keys and values it must read (measured copy bandwidth). Prints JSON.
"""
import argparse
import json

import torch

H, K, E = 14, 2, 64
G = H // K


def cache(slots, capacity, dtype, gen):
    k = torch.randn(slots, K, capacity, E, device="cuda", dtype=dtype, generator=gen)
    v = torch.randn(slots, K, capacity, E, device="cuda", dtype=dtype, generator=gen)
    return k, v


def reference(q_bhe, k, v, used):
    out = []
    for i, n in enumerate(used):
        kk = k[i, :, :n].float().repeat_interleave(G, 0)  # [h, n, e]
        vv = v[i, :, :n].float().repeat_interleave(G, 0)
        p = torch.softmax((q_bhe[i].float().unsqueeze(1) @ kk.transpose(1, 2)).squeeze(1) / E**0.5, -1)
        out.append((p.unsqueeze(1) @ vv).squeeze(1))
    return torch.stack(out)  # [b, h, e]


def sdpa(q_bhe, k, v, positions, keys):
    b = q_bhe.size(0)
    mask = torch.arange(keys, device="cuda").view(1, 1, 1, keys) <= positions.view(b, 1, 1, 1)
    q = q_bhe.view(b, K, G, E)
    return torch.nn.functional.scaled_dot_product_attention(q, k[:b, :, :keys], v[:b, :, :keys], mask).reshape(b, H, E)


def matmul(q_bhe, k, v, positions, keys):
    b = q_bhe.size(0)
    mask = torch.arange(keys, device="cuda").view(1, 1, 1, keys) <= positions.view(b, 1, 1, 1)
    q = q_bhe.reshape(b * K, G, E)
    kx = k[:b, :, :keys].reshape(b * K, keys, E)
    vx = v[:b, :, :keys].reshape(b * K, keys, E)
    s = torch.bmm(q, kx.transpose(1, 2), out_dtype=torch.float32).view(b, K, G, keys) * (1.0 / E**0.5)
    s = s.masked_fill(mask.logical_not(), float("-inf"))
    p = torch.softmax(s, -1).to(vx.dtype).view(b * K, G, keys)
    return torch.bmm(p, vx).view(b, H, E)


def flash(q_bhe, k, v, positions, keys):
    b = q_bhe.size(0)
    n, _, c, _ = k.shape
    cu_q = torch.arange(b * K + 1, device="cuda", dtype=torch.int32)
    cu_k = cu_q * c
    used = (positions + 1).view(b, 1).expand(b, K).reshape(b * K).to(torch.int32)
    out = torch.ops.aten._flash_attention_forward(
        q_bhe.reshape(b * K, G, E), k.view(n * K * c, 1, E), v.view(n * K * c, 1, E), cu_q, cu_k, 1, keys,
        0.0, False, False, seqused_k=used)[0]
    return out.reshape(b, H, E)


def prefill_flash(q_hte, k, v, slot, start):
    t = q_hte.size(1)
    n, _, c, _ = k.shape
    heads = torch.arange(K + 1, device="cuda", dtype=torch.int32)
    q = q_hte.view(K, G, t, E).permute(0, 2, 1, 3).reshape(K * t, G, E)
    out = torch.ops.aten._flash_attention_forward(
        q, k.view(n * K * c, 1, E), v.view(n * K * c, 1, E), heads * t, (heads + slot * K) * c, t, start + t,
        0.0, True, False, seqused_k=torch.full((K,), start + t, device="cuda", dtype=torch.int32))[0]
    return out.view(K, t, G, E).permute(0, 2, 1, 3).reshape(H, t, E)


def prefill_sdpa(q_hte, k, v, slot, start):
    t = q_hte.size(1)
    s = start + t
    kk = k[slot, :, :s].repeat_interleave(G, 0).unsqueeze(0)
    vv = v[slot, :, :s].repeat_interleave(G, 0).unsqueeze(0)
    mask = torch.arange(s, device="cuda").view(1, s) <= (torch.arange(t, device="cuda") + start).view(t, 1)
    return torch.nn.functional.scaled_dot_product_attention(q_hte.unsqueeze(0), kk, vv, mask)[0]


def graph_time(fn, reps=20):
    """Median ms of a CUDA-graph replay of fn (warmed up first)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def copy_bandwidth():
    x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = graph_time(lambda: y.copy_(x), reps=10)
    return 2 * x.numel() / (ms / 1e3)


def step_breakdown(rows, keys_used, dtype):
    """Time one 24-layer decode step of the Qwen2-0.5B shape as policy/model runs it (CUDA graph),
    and the same with parts left out or replaced, to place the step's time."""
    d, f, v, layers = 896, 4864, 151936, 24
    gen = torch.Generator(device="cuda").manual_seed(1)
    def w(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype, generator=gen) * 0.02
    L = [dict(n1=1 + w(d), n2=1 + w(d), q=w(H * E, d), qb=w(H * E), k=w(K * E, d), kb=w(K * E), v=w(K * E, d),
              vb=w(K * E), o=w(d, H * E), g=w(f, d), u=w(f, d), dn=w(d, f)) for _ in range(layers)]
    emb = w(v, d)
    capacity = keys_used + 256
    kc = [torch.randn(rows, K, capacity, E, device="cuda", dtype=dtype, generator=gen) for _ in range(layers)]
    vc = [torch.randn(rows, K, capacity, E, device="cuda", dtype=dtype, generator=gen) for _ in range(layers)]
    cos = torch.randn(capacity, E, device="cuda", dtype=dtype, generator=gen)
    sin = torch.randn(capacity, E, device="cuda", dtype=dtype, generator=gen)
    tokens = torch.randint(0, v, (rows,), device="cuda", generator=gen)
    positions = torch.full((rows,), keys_used - 1, device="cuda")

    def rms(x, wt, fused):
        if fused == "weight":  # one kernel, weight applied in fp32 (not transformers' rounding)
            return torch.nn.functional.rms_norm(x, (d,), wt, 1e-6)
        if fused:  # layers.cpp: fp32 rms_norm without weight, cast, then scaled
            return wt * torch.nn.functional.rms_norm(x.float(), (d,), None, 1e-6).to(x.dtype)
        x32 = x.float()
        return wt * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)

    def step(fused_norm=True, attention="flash", mlp=True, head=True, rope=True):
        b = rows
        x = torch.nn.functional.embedding(tokens.view(b, 1), emb)
        c = cos.index_select(0, positions).view(b, 1, 1, E)
        sg = torch.ones(E, device="cuda", dtype=dtype)
        sg[: E // 2] = -1
        s_ = (sin.index_select(0, positions) * sg).view(b, 1, 1, E)
        for i, lw in enumerate(L):
            hN = rms(x, lw["n1"], fused_norm)
            q = torch.nn.functional.linear(hN, lw["q"], lw["qb"]).view(b, 1, H, E).transpose(1, 2)
            k = torch.nn.functional.linear(hN, lw["k"], lw["kb"]).view(b, 1, K, E).transpose(1, 2)
            vv = torch.nn.functional.linear(hN, lw["v"], lw["vb"]).view(b, 1, K, E).transpose(1, 2)
            if rope:
                q = q * c + torch.roll(q, E // 2, -1) * s_
                k = k * c + torch.roll(k, E // 2, -1) * s_
            idx = positions.view(b, 1, 1, 1).expand(b, K, 1, E)
            kc[i].scatter_(2, idx, k)
            vc[i].scatter_(2, idx, vv)
            if attention == "flash":
                a = flash(q.reshape(b, H, E), kc[i], vc[i], positions, keys_used)
            elif attention == "sdpa":
                a = sdpa(q.reshape(b, H, E), kc[i], vc[i], positions, keys_used)
            else:
                a = q.reshape(b, H, E)
            x = x + torch.nn.functional.linear(a.reshape(b, 1, H * E), lw["o"])
            if mlp:
                h2 = rms(x, lw["n2"], fused_norm)
                x = x + torch.nn.functional.linear(
                    torch.nn.functional.silu(torch.nn.functional.linear(h2, lw["g"])) * torch.nn.functional.linear(h2, lw["u"]),
                    lw["dn"])
        if head:
            return torch.nn.functional.linear(rms(x, L[0]["n1"], fused_norm), emb).float()
        return x

    def sample():
        logits = torch.randn(rows, v, device="cuda", generator=gen)
        temp = torch.ones(rows, 1, device="cuda")
        u = torch.rand(rows, device="cuda", generator=gen)
        def run():
            logp = torch.log_softmax(logits / temp, -1)
            greedy = logits.argmax(-1, keepdim=True)
            cdf = logp.exp().cumsum(-1)
            drawn = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1), right=True).clamp_max(v - 1)
            tok = torch.where(temp > 2, greedy, drawn)
            return torch.stack([tok.squeeze(1).float(), logp.gather(1, tok).squeeze(1)])
        return run

    out = {"rows": rows, "keys": keys_used}
    for name, kw in (("step", {}), ("step_sdpa", dict(attention="sdpa")), ("step_composite_rms_norm", dict(fused_norm=False)),
                     ("step_rms_norm_with_weight", dict(fused_norm="weight")),
                     ("no_attention", dict(attention="none")), ("no_mlp", dict(mlp=False)),
                     ("no_lm_head", dict(head=False)), ("no_rope", dict(rope=False))):
        try:
            out[name + "_ms"] = graph_time(lambda: step(**kw))
        except Exception as e:  # noqa: BLE001
            out[name + "_error"] = str(e).splitlines()[0][:300]
    out["sampling_ms"] = graph_time(sample())
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    args = parser.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(0)
    dtype = torch.bfloat16
    bw = copy_bandwidth()
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "copy_bytes_per_s": bw,
           "schema": str(torch.ops.aten._flash_attention_forward.default._schema), "decode": [], "prefill": []}
    # (rows, capacity, used keys of the rows): the 64 x 512 bench, the agent workload at mid and end
    # of its episodes, uneven rows, one 131k row.
    cases = [(64, 552, [544] * 64), (64, 32768, [12800] * 64), (64, 32768, [25000] * 64),
             (64, 32768, [200 + 390 * i for i in range(64)]), (1, 131072, [131000])]
    for rows, capacity, used in cases:
        k, v = cache(rows, capacity, dtype, gen)
        positions = torch.tensor([n - 1 for n in used], device="cuda")
        keys = min((max(used) + 255) // 256 * 256, capacity)  # the engine's key bucket
        q = torch.randn(rows, H, E, device="cuda", dtype=dtype, generator=gen)
        ref = reference(q, k, v, used)
        row = {"rows": rows, "capacity": capacity, "used_mean": sum(used) / rows, "keys": keys,
               "bound_ms": 2 * sum(used) * K * E * 2 / bw * 1e3}
        for name, fn in (("sdpa", sdpa), ("matmul", matmul), ("flash", flash)):
            try:
                got = fn(q, k, v, positions, keys).float()
                row[name + "_rel_err"] = ((got - ref).norm() / ref.norm()).item()
                row[name + "_ms"] = graph_time(lambda: fn(q, k, v, positions, keys))
            except Exception as e:  # noqa: BLE001 (a kernel that does not apply: reported, not fatal)
                row[name + "_error"] = str(e).splitlines()[0][:300]
        out["decode"].append(row)
        print(json.dumps(row), flush=True)
        del k, v
    for start, t, capacity in ((12000, 500, 32768), (130000, 512, 131072), (24000, 2048, 32768)):
        k, v = cache(2, capacity, dtype, gen)
        q = torch.randn(H, t, E, device="cuda", dtype=dtype, generator=gen)
        s = start + t
        kk = k[1, :, :s].float().repeat_interleave(G, 0)
        vv = v[1, :, :s].float().repeat_interleave(G, 0)
        mask = torch.arange(s, device="cuda").view(1, s) <= (torch.arange(t, device="cuda") + start).view(t, 1)
        ref = torch.nn.functional.scaled_dot_product_attention(q.float().unsqueeze(0), kk.unsqueeze(0),
                                                               vv.unsqueeze(0), mask)[0]
        row = {"start": start, "new": t}
        for name, fn in (("sdpa", prefill_sdpa), ("flash", prefill_flash)):
            try:
                got = fn(q, k, v, 1, start).float()
                row[name + "_rel_err"] = ((got - ref).norm() / ref.norm()).item()
                row[name + "_ms"] = graph_time(lambda: fn(q, k, v, 1, start))
            except Exception as e:  # noqa: BLE001
                row[name + "_error"] = str(e).splitlines()[0][:300]
        out["prefill"].append(row)
        print(json.dumps(row), flush=True)
        del k, v
    out["steps"] = []
    for rows, keys_used in ((64, 544), (64, 12800), (1, 131000)):
        r = step_breakdown(rows, keys_used, dtype)
        out["steps"].append(r)
        print(json.dumps(r), flush=True)
        torch.cuda.empty_cache()
    text = json.dumps(out, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
