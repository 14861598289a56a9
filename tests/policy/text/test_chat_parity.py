"""Chat rendering (full and incremental) matches transformers' apply_chat_template
with the Jinja template of the same format."""
import json

import pytest
from transformers import PreTrainedTokenizerFast

TOOLS = [
    {"type": "function", "function": {
        "name": "bash", "description": "Run a shell command in the workspace; output is truncated.",
        "parameters": {"type": "object", "properties": {
            "cmd": {"type": "string", "description": "the command"},
            "timeout_s": {"type": "number", "default": 30.5}},
            "required": ["cmd"]}}},
    {"type": "function", "function": {
        "name": "write_file", "description": "Write a file (UTF-8). Ünïcödé 中文 ok.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"]}}},
]

KERNEL = "__global__ void relu(float* x, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] = fmaxf(x[i], 0.f);\n}\n"

CONVERSATIONS = {
    "prompt_only": dict(messages=[{"role": "user", "content": "Write a fast ReLU kernel."}],
                        tools=TOOLS, add_generation_prompt=True),
    "no_tools_system": dict(messages=[{"role": "system", "content": "You write CUDA."},
                                      {"role": "user", "content": "hi"},
                                      {"role": "assistant", "content": "Hello! 你好"}],
                            tools=[], add_generation_prompt=False),
    "tool_episode": dict(messages=[
        {"role": "system", "content": "You are a CUDA kernel engineer."},
        {"role": "user", "content": "Make model.py faster."},
        {"role": "assistant", "content": "Let me look at the files first.",
         "tool_calls": [{"type": "function", "function": {"name": "bash", "arguments": {"cmd": "ls -la"}}}]},
        {"role": "tool", "content": "model.py\nkernels/\n"},
        {"role": "assistant", "content": "",
         "tool_calls": [
             {"type": "function", "function": {"name": "write_file",
                                               "arguments": {"path": "kernels/relu.cu", "content": KERNEL}}},
             {"type": "function", "function": {"name": "bash", "arguments": {"cmd": "nvcc -O3 kernels/relu.cu", "timeout_s": 120}}}]},
        {"role": "tool", "content": "written 120 bytes"},
        {"role": "tool", "content": "error: identifier \"fmaxf\" is undefined\n  ^ \t"},
        {"role": "assistant", "content": "Fixed and verified: 1.8x faster than eager. ✅"},
    ], tools=TOOLS, add_generation_prompt=False),
    "ends_with_observation": dict(messages=[
        {"role": "user", "content": "check the GPU"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "bash", "arguments": {"cmd": "nvidia-smi"}}]},
        {"role": "tool", "content": "H200 141GB"},
        {"role": "user", "content": "and the driver?"},
    ], tools=TOOLS, add_generation_prompt=True),
}


def reference_ids(tokenizer_file, template, conv):
    tok = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file))
    tok.chat_template = template
    kwargs = dict(tools=conv["tools"] or None, add_generation_prompt=conv["add_generation_prompt"])
    text = tok.apply_chat_template(conv["messages"], tokenize=False, **kwargs)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return text, ids


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_render_matches_reference(name, qwen_tokenizer_file, chat_template, text_tool, tmp_path):
    conv = CONVERSATIONS[name]
    ref_text, ref_ids = reference_ids(qwen_tokenizer_file, chat_template, conv)
    inp = tmp_path / "conv.json"
    inp.write_text(json.dumps(conv, ensure_ascii=False), encoding="utf-8")
    got = text_tool("render-chat", qwen_tokenizer_file, inp)
    assert got["text"] == ref_text
    assert got["ids"] == ref_ids
    inc = got["incremental"]
    # The assistant bodies here start with text, not whitespace, so the
    # sampled tokens re-tokenize the same way and the sequences are equal.
    assert inc["ids"] == ref_ids
    assert len(inc["loss_mask"]) == len(inc["ids"])


def test_loss_mask_covers_exactly_the_assistant_bodies(qwen_tokenizer_file, chat_template, text_tool, tmp_path):
    conv = CONVERSATIONS["tool_episode"]
    tok = PreTrainedTokenizerFast(tokenizer_file=str(qwen_tokenizer_file))
    inp = tmp_path / "conv.json"
    inp.write_text(json.dumps(conv, ensure_ascii=False), encoding="utf-8")
    inc = text_tool("render-chat", qwen_tokenizer_file, inp)["incremental"]
    ids, mask = inc["ids"], inc["loss_mask"]
    masked_text = tok.decode([i for i, m in zip(ids, mask) if m])
    im_end = "<|im_end|>"
    bodies = [m for m in conv["messages"] if m["role"] == "assistant"]
    assert masked_text.count(im_end) == len(bodies)
    assert "<|im_start|>" not in masked_text and "<tool_response>" not in masked_text
    assert "Let me look at the files first." in masked_text and "kernels/relu.cu" in masked_text
    kinds = [t["kind"] for t in inc["turns"]]
    assert kinds == ["prompt", "assistant", "observation", "assistant", "observation", "assistant", "closing"]
    assert inc["turns"][0]["begin"] == 0 and inc["turns"][-1]["end"] == len(ids)
    for a, b in zip(inc["turns"], inc["turns"][1:]):
        assert a["end"] == b["begin"]
    for t in inc["turns"]:
        assert all(mask[i] == (t["kind"] == "assistant") for i in range(t["begin"], t["end"]))
