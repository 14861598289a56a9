#!/usr/bin/env python3
"""The learner's training step in PyTorch eager Python, the baseline of bench/learner/run_h200.sh.

A random Qwen2-0.5B-shaped transformers model (fp32 master weights), bf16 autocast, gradient
checkpointing, fused AdamW; the loss is the masked NLL of the tokens (the RFT step learner_tool
bench times). --context tokens in sequences of --seq-len, run as a [context / seq-len, seq-len]
batch (equal lengths need no padding). Prints one JSON line with the same fields and the same MFU
definition as learner_tool bench: model FLOPs per step = 6 * N * tokens + 12 * L * H * E *
sum_i len_i^2, N = parameters without the input embedding (the LM head counted once when tied).
"""
import argparse
import json
import time

import torch
import transformers


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--context", type=int, default=8192)
    p.add_argument("--seq-len", type=int, default=0)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--peak-tflops", type=float, default=989.0)
    p.add_argument("--attn", default="sdpa")
    a = p.parse_args()
    seq = a.seq_len or a.context
    cfg = transformers.Qwen2Config(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=131072,
        rope_theta=1000000.0, tie_word_embeddings=True, bos_token_id=None, eos_token_id=None)
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM._from_config(cfg, attn_implementation=a.attn).to("cuda", torch.float32)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-6, weight_decay=0.01, fused=True)
    tokens = torch.randint(0, cfg.vocab_size, (a.context // seq, seq), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=tokens, use_cache=False).logits[:, :-1]
        logp = torch.log_softmax(logits.float(), -1).gather(-1, tokens[:, 1:, None])
        loss = -logp.mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / a.steps
    params = sum(p.numel() for n, p in model.named_parameters() if "embed_tokens" not in n)
    params += cfg.vocab_size * cfg.hidden_size  # the tied LM head's matrix multiply
    flops = 6 * params * a.context + 12 * cfg.num_hidden_layers * cfg.num_attention_heads * 64 * seq * a.context
    print(json.dumps({"impl": "transformers", "context": a.context, "seq_len": seq, "steps": a.steps,
                      "step_seconds": seconds, "tokens_per_second": a.context / seconds,
                      "model_tflops_per_step": flops / 1e12, "mfu": flops / seconds / (a.peak_tflops * 1e12),
                      "peak_memory_bytes": torch.cuda.max_memory_allocated()}))


if __name__ == "__main__":
    main()
