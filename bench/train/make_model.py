#!/usr/bin/env python3
"""Writes a random checkpoint of the Qwen2-0.5B shape (hidden 896, 24 layers, 14 heads, 2
key/value heads, intermediate 4864, vocabulary 151,936, tied embeddings) with transformers, no
download: the model of config/h200-iteration.toml. The tokenizer files come from --tokenizer
(default models/tiny-qwen2: its ids are a subset of the vocabulary, so every scripted token is a
valid id of the larger model). Weights are initialised on the GPU when there is one (seconds
instead of a minute on the CPU) and saved in bf16 (the learner keeps fp32 masters of them).

    python3 bench/train/make_model.py --out runs/qwen2-0.5b-random [--tokenizer models/tiny-qwen2]
"""
import argparse
import json
import pathlib
import shutil
import time

import torch
import transformers

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=pathlib.Path)
    p.add_argument("--tokenizer", type=pathlib.Path, default=ROOT / "models" / "tiny-qwen2")
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    start = time.time()
    tok = json.loads((args.tokenizer / "tokenizer.json").read_text(encoding="utf-8"))
    ids = dict(tok["model"]["vocab"])
    ids.update({a["content"]: a["id"] for a in tok.get("added_tokens", [])})
    eos = ids.get("<|im_end|>")
    config = transformers.Qwen2Config(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=args.layers,
        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
        tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6,
        bos_token_id=None, eos_token_id=eos, pad_token_id=None)
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = transformers.Qwen2ForCausalLM(config).to(torch.bfloat16).eval()
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    for name in TOKENIZER_FILES:
        if (args.tokenizer / name).exists():
            shutil.copy(args.tokenizer / name, args.out / name)
    n = sum(t.numel() for t in model.parameters())
    print(json.dumps({"out": str(args.out), "parameters": n, "device": device, "seconds": round(time.time() - start, 1)}))


if __name__ == "__main__":
    main()
