#!/usr/bin/env python3
"""Creates a small random Qwen2-shaped causal LM checkpoint with transformers.

Output (into --out): config.json, model.safetensors, generation_config.json, and, when
--tokenizer DIR is given, that directory's tokenizer files (the vocabulary then matches the
tokenizer; otherwise it is 512). The C++ policy (policy/model) loads this directory; it is the
model of the embedded `local` default and of tests that need a real checkpoint.

Usage:
    python tools/make_tiny_model.py --out DIR [--tokenizer DIR] [--hidden 64] [--layers 2]
                                    [--seed 0] [--value-head]

Deterministic: the same arguments give identical tensors.
"""
import argparse
import json
import pathlib
import shutil
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file

TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
# Qwen2's end-of-turn tokens, used as eos when the tokenizer has them.
EOS_CANDIDATES = ["<|im_end|>", "<|endoftext|>"]


def tokenizer_vocab(tokenizer_dir):
    """(vocab size including added tokens, eos id or None) of a tokenizer.json."""
    data = json.loads((tokenizer_dir / "tokenizer.json").read_text(encoding="utf-8"))
    ids = dict(data["model"]["vocab"])
    for added in data.get("added_tokens", []):
        ids[added["content"]] = added["id"]
    eos = next((ids[t] for t in EOS_CANDIDATES if t in ids), None)
    return max(ids.values()) + 1, eos


def make_config(vocab, hidden, layers, eos):
    heads = max(hidden // 32, 2)
    return transformers.Qwen2Config(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 2,
        num_hidden_layers=layers, num_attention_heads=heads,
        # Rationale: 2 key/value heads keep grouped-query attention exercised at any width.
        num_key_value_heads=2 if heads % 2 == 0 else 1,
        max_position_embeddings=8192, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=eos, pad_token_id=None)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--tokenizer", type=pathlib.Path, help="directory with tokenizer.json")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--value-head", action="store_true", help="add value_head.weight/bias (critic)")
    args = parser.parse_args(argv)

    vocab, eos = 512, None
    if args.tokenizer:
        if not (args.tokenizer / "tokenizer.json").exists():
            sys.exit(f"{args.tokenizer}/tokenizer.json not found")
        vocab, eos = tokenizer_vocab(args.tokenizer)
    torch.manual_seed(args.seed)
    model = transformers.Qwen2ForCausalLM(make_config(vocab, args.hidden, args.layers, eos)).eval()
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    if args.value_head:
        weights = args.out / "model.safetensors"
        tensors = load_file(weights)
        gen = torch.Generator().manual_seed(args.seed + 1)
        tensors["value_head.weight"] = torch.randn(1, args.hidden, generator=gen) * 0.02
        tensors["value_head.bias"] = torch.zeros(1)
        save_file(tensors, weights, metadata={"format": "pt"})
    if args.tokenizer:
        for name in TOKENIZER_FILES:
            src, dst = args.tokenizer / name, args.out / name
            if src.exists() and not (dst.exists() and src.samefile(dst)):
                shutil.copy(args.tokenizer / name, args.out / name)
    print(f"wrote {args.out} (vocab {vocab}, hidden {args.hidden}, layers {args.layers})")


if __name__ == "__main__":
    main()
