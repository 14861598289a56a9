#!/usr/bin/env python3
"""Generation throughput and bf16 logits parity of the C++ policy engine on a CUDA GPU.

Builds policy_model_tool (CMake, -DCAF_AGENT_LIBTORCH_ONLY=ON), makes a random Qwen2-0.5B-shaped
checkpoint (hidden 896, 24 layers, 14 heads, 2 kv heads, intermediate 4864, vocab 151936, tied),
then, in one run:
  1. C++ engine: --batch concurrent sequences x --new-tokens tokens (bf16, CUDA);
  2. transformers `generate` on the same prompts and sampling settings;
  3. bf16 logits of both against an fp32 reference.
Prints one JSON object (and writes it to --out when given). See bench/policy/README.md.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import torch
import transformers

REPO = pathlib.Path(__file__).resolve().parents[2]
# Rationale: the target; the engine avoids Python and per-op host syncs.
TARGET_SPEEDUP = 3.0


# A stand-in GoogleTest package: the top-level CMakeLists.txt still requires GTest even with
# CAF_AGENT_LIBTORCH_ONLY=ON, and a GPU machine may not have it. Only policy_model_tool is built,
# so empty targets suffice. Remove once the top level makes GTest optional.
GTEST_STUB = """add_library(GTest::gtest INTERFACE IMPORTED)
add_library(GTest::gtest_main INTERFACE IMPORTED)
set(GTest_FOUND TRUE)
"""


def build_tool(build_dir, source=REPO, targets=("policy_model_tool",), prebuilt=None):
    """Configures `source` (LibTorch only, Release) and builds `targets`; returns policy_model_tool's path.
    `prebuilt`: a folder of bench/policy/prebuilt.py's, used instead of the build where it fits
    (policy_model_tool alone, from this tree, for this torch; it says which and why)."""
    if tuple(targets) == ("policy_model_tool",) and source == REPO:
        import prebuilt as prebuilt_tool  # bench/policy, beside this file
        path = prebuilt_tool.installed(build_dir, torch.__version__)  # by an earlier call with `prebuilt`
        if path is None and prebuilt:
            path, why = prebuilt_tool.install(prebuilt, build_dir, pathlib.Path(torch.__file__).parent,
                                              torch.__version__)
            print(why, flush=True)
        if path is not None:
            return path
    if not (build_dir / "build.ninja").exists():
        configure = ["cmake", "-S", str(source), "-B", str(build_dir), "-G", "Ninja",
                     "-DCMAKE_BUILD_TYPE=Release", "-DCAF_AGENT_LIBTORCH_ONLY=ON",
                     f"-DPython3_EXECUTABLE={sys.executable}"]
        if subprocess.run(configure).returncode != 0:
            stub = build_dir / "gtest_stub"
            stub.mkdir(parents=True, exist_ok=True)
            (stub / "GTestConfig.cmake").write_text(GTEST_STUB)
            print("configure failed; retrying with a stand-in GTest package", file=sys.stderr)
            subprocess.run(configure + [f"-DGTest_DIR={stub}"], check=True)
    subprocess.run(["cmake", "--build", str(build_dir), "--target", *targets,
                    "-j", str(os.cpu_count() or 4)], check=True)
    return build_dir / "policy/model/policy_model_tool"


def make_model(path, seed):
    config = transformers.Qwen2Config(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=True, bos_token_id=None, eos_token_id=None,
        pad_token_id=None)
    torch.manual_seed(seed)
    with torch.device("cuda"):
        transformers.Qwen2ForCausalLM(config).to(torch.bfloat16).save_pretrained(path)
    # Loaded back rather than kept: .to(bfloat16) also rounds RoPE's inv_freq buffer, which
    # from_pretrained keeps in fp32 (as real bf16 checkpoints are used).
    return load_hf(path, torch.bfloat16)


def load_hf(path, dtype):
    return transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype).cuda().eval()


def tool(path, *args):
    proc = subprocess.run([str(path), *map(str, args)], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"policy_model_tool {args[0]} failed:\n{proc.stderr}")
    return proc.stdout


def bench_cpp(tool_path, model_dir, prompts, args):
    out = tool(tool_path, "bench", "--model", model_dir, "--device", "cuda", "--dtype", "bfloat16",
               "--max-batch", len(prompts), "--max-context", args.prompt_len + args.new_tokens + 8,
               "--prompts", ";".join(",".join(map(str, p)) for p in prompts),
               "--max-new-tokens", args.new_tokens, "--temperature", 1.0, "--seed", 0)
    result = json.loads(out.strip().splitlines()[-1])
    return result["tokens"] / result["seconds"], result


def bench_hf(model, prompts, args):
    input_ids = torch.tensor(prompts, device="cuda")
    kwargs = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, eos_token_id=None,
                  pad_token_id=0, attention_mask=torch.ones_like(input_ids))
    with torch.no_grad():
        model.generate(input_ids, max_new_tokens=8, **kwargs)  # warm-up
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = model.generate(input_ids, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, **kwargs)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    tokens = (out.shape[1] - input_ids.shape[1]) * out.shape[0]
    return tokens / seconds, {"seconds": seconds, "tokens": tokens}


def logits_parity(tool_path, model_dir, model, tokens):
    """bf16 logits of the C++ model and of transformers, each against an fp32 reference."""
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "logits.bin"
        tool(tool_path, "logits", "--model", model_dir, "--device", "cuda", "--dtype", "bfloat16",
             "--tokens", ",".join(map(str, tokens)), "--out", out)
        import numpy as np
        cpp = torch.from_numpy(np.fromfile(out, dtype=np.float32)).view(len(tokens), -1).cuda()
    ids = torch.tensor([tokens], device="cuda")
    with torch.no_grad():
        hf = model(ids).logits[0].float()
        reference = load_hf(model_dir, torch.float32)
        ref = reference(ids).logits[0]
        del reference
    return {
        "cpp_vs_hf_bf16_max_abs": (cpp - hf).abs().max().item(),
        "cpp_vs_fp32_max_abs": (cpp - ref).abs().max().item(),
        "hf_bf16_vs_fp32_max_abs": (hf - ref).abs().max().item(),
        "argmax_agreement_cpp_hf": (cpp.argmax(-1) == hf.argmax(-1)).float().mean().item(),
    }


def graphs_match_eager(tool_path, model_dir, prompts):
    """Fraction of greedy tokens equal with and without CUDA graphs (8 prompts x 64 tokens)."""
    def run(*extra):
        out = tool(tool_path, "generate", "--model", model_dir, "--device", "cuda", "--dtype", "bfloat16",
                   "--max-batch", 8, "--max-context", 512, "--max-new-tokens", 64, "--temperature", 0,
                   "--prompts", ";".join(",".join(map(str, p)) for p in prompts[:8]), *extra)
        return [json.loads(line)["tokens"] for line in out.splitlines()]
    graphs, eager = run(), run("--no-cuda-graphs")
    same = sum(a == b for g, e in zip(graphs, eager) for a, b in zip(g, e))
    return same / sum(len(g) for g in graphs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=pathlib.Path, default=REPO / "build-bench")
    parser.add_argument("--model-dir", type=pathlib.Path, default=None, help="default: a temp dir")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--out", type=pathlib.Path, help="also write the JSON result here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_generate.py needs a CUDA GPU")
    tool_path = build_tool(args.build_dir)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model_dir or pathlib.Path(tmp) / "qwen2-0.5b-random"
        model = make_model(model_dir, seed=0)
        gen = torch.Generator().manual_seed(1)
        prompts = torch.randint(0, 151936, (args.batch, args.prompt_len), generator=gen).tolist()
        parity = logits_parity(tool_path, model_dir, model, prompts[0] * 2)
        graphs_agreement = graphs_match_eager(tool_path, model_dir, prompts)
        cpp_tps, cpp = bench_cpp(tool_path, model_dir, prompts, args)
        hf_tps, hf = bench_hf(model, prompts, args)
    result = {
        "date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(),
        "host": platform.node(), "torch": torch.__version__, "transformers": transformers.__version__,
        "command": " ".join(sys.argv), "batch": args.batch, "new_tokens": args.new_tokens,
        "prompt_len": args.prompt_len, "cpp_tokens_per_s": cpp_tps, "hf_tokens_per_s": hf_tps,
        "speedup": cpp_tps / hf_tps, "target_speedup": TARGET_SPEEDUP, "cpp": cpp, "hf": hf,
        "logits_parity_bf16": parity, "greedy_graphs_vs_eager_agreement": graphs_agreement,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if result["speedup"] >= TARGET_SPEEDUP else 1


if __name__ == "__main__":
    sys.exit(main())
