"""The checkpoint templates (tests/policy/text/templates/, the real Qwen2.5,
Qwen3 and Llama 3.1 template texts) render in C++ exactly as transformers'
apply_chat_template renders them, over generated conversations with tool
calls and tool results; other templates are refused."""
import json
import pathlib
import random

import pytest
from tokenizers import AddedToken, Tokenizer
from transformers import PreTrainedTokenizerFast

TEMPLATES = pathlib.Path(__file__).with_name("templates")
FAMILIES = {
    "qwen2.5": ("qwen2.5-instruct.jinja", "<|endoftext|>",
                ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], ["<tool_call>", "</tool_call>"]),
    "qwen3": ("qwen3.jinja", "<|endoftext|>",
              ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
              ["<tool_call>", "</tool_call>", "<think>", "</think>", "<tool_response>", "</tool_response>"]),
    "llama3.1": ("llama3.1-instruct.jinja", "<|begin_of_text|>",
                 ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"], []),
}
FAMILIES["qwen3-content-string"] = ("qwen3-content-string.jinja",) + FAMILIES["qwen3"][1:]


def family_of(name):
    """The C++ family of a FAMILIES entry (a template revision shares its family's renderer)."""
    return "qwen3" if name.startswith("qwen3") else name
CONVERSATIONS_PER_FAMILY = 60

WEIRD = ["", " ", "\n", "  lead", "trail \n", "\u3000全角\u3000", "\u00a0nbsp\u00a0", "\x1csep\x1f",
         "line\u2028sep", "quote \" back\\slash", "tab\tnew\nline", "emoji 🚀 ü", "<tool_response>x</tool_response>",
         "{\"json\": 1}", "\n\nnl both\n\n", "ends with newline\n"]
WORDS = ["kernel", "fuse", "the", "GPU", "nvcc", "ptx", "损失", "тест", "λ", "x", "speedup", "1.5x"]


def text(rng, lo=0, hi=8):
    parts = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
    if rng.random() < 0.35:
        parts.insert(rng.randint(0, len(parts)), rng.choice(WEIRD))
    return " ".join(parts)


def json_value(rng, depth=0):
    kind = rng.randrange(10 if depth < 2 else 7)
    if kind == 0:
        return rng.choice([0, 7, -3, 2**63 - 1, -2**63, 2**64 + 5, -(2**70), 10**30])
    if kind == 1:
        return rng.choice([0.0, 0.1, -2.5, 1e-7, 1e16, 123456789.125, 3.0, 1e300, -0.0])
    if kind == 2:
        return rng.choice([True, False, None])
    if kind in (3, 4, 5, 6):
        return text(rng, 0, 4)
    if kind in (7, 8):
        return {rng.choice(WORDS + ["name", "a b", "ü"]) + str(i): json_value(rng, depth + 1)
                for i in range(rng.randint(0, 3))}
    return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]


def tool_def(rng, i):
    props = {f"p{k}": {"type": rng.choice(["string", "integer", "number", "object"]),
                       "description": text(rng, 1, 5)} for k in range(rng.randint(0, 3))}
    if props and rng.random() < 0.5:
        next(iter(props.values()))["default"] = json_value(rng, 2)
    fn = {"name": f"tool_{i}_{rng.choice(WORDS[:6])}", "description": text(rng, 1, 10),
          "parameters": {"type": "object", "properties": props, "required": list(props)[:1]}}
    return {"type": "function", "function": fn}


def tool_call(rng, tools):
    name = rng.choice(tools)["function"]["name"] if tools else "bash"
    if rng.random() < 0.2:
        args = json.dumps({"cmd": text(rng, 1, 3)}, ensure_ascii=rng.random() < 0.5)
    else:
        args = {f"a{k}": json_value(rng) for k in range(rng.randint(0, 3))}
    return {"type": "function", "function": {"name": name, "arguments": args}}


def conversation(family, seed):
    rng = random.Random(seed)
    tools = [tool_def(rng, i) for i in range(rng.choice([0, 1, 1, 2, 3]))]
    msgs = []
    if rng.random() < 0.6:
        msgs.append({"role": "system", "content": text(rng, 0, 10)})
    msgs.append({"role": "user", "content": text(rng, 1, 12)})
    for turn in range(rng.randint(0, 5)):
        content = text(rng, 0, 10)
        if family == "qwen3" and rng.random() < 0.3:
            content = rng.choice(["<think>\n", "", "pre<think>"]) + text(rng, 0, 5) + "\n</think>\n\n" + content
        msg = {"role": "assistant", "content": content}
        max_calls = 1 if family == "llama3.1" else 3
        calls = [tool_call(rng, tools) for _ in range(rng.randint(0, max_calls))]
        if calls:
            msg["tool_calls"] = calls
        msgs.append(msg)
        if calls or rng.random() < 0.3:
            for _ in range(max(1, len(calls))):
                msgs.append({"role": "tool", "content": text(rng, 0, 12)})
        if rng.random() < 0.25:
            wrapped = family == "qwen3" and rng.random() < 0.5
            content = "<tool_response>\n" + text(rng) + "\n</tool_response>" if wrapped else text(rng, 1, 6)
            msgs.append({"role": "user", "content": content})
        if rng.random() < 0.08:
            msgs.append({"role": "system", "content": text(rng, 1, 4)})
    conv = {"messages": msgs, "tools": tools, "add_generation_prompt": rng.random() < 0.6}
    if family == "qwen3" and rng.random() < 0.5:
        conv["enable_thinking"] = rng.random() < 0.5
    return conv


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory, train_tokenizer):
    """(name, template text, tokenizer.json path, reference tokenizer) per family."""
    name = request.param
    file, bos, specials, extra = FAMILIES[name]
    template = (TEMPLATES / file).read_text(encoding="utf-8")
    tok = Tokenizer.from_file(str(train_tokenizer("qwen2" if name != "llama3.1" else "llama3")))
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in specials])
    tok.add_tokens([AddedToken(s, normalized=False, special=False) for s in extra])
    path = tmp_path_factory.mktemp(f"tpl_{name}") / "tokenizer.json"
    tok.save(str(path))
    ref = PreTrainedTokenizerFast(tokenizer_file=str(path), bos_token=bos)
    return name, template, path, ref


def reference(ref, template, conv):
    kwargs = {}
    if "enable_thinking" in conv:
        kwargs["enable_thinking"] = conv["enable_thinking"]
    return ref.apply_chat_template(conv["messages"], tools=conv["tools"] or None, chat_template=template,
                                   tokenize=False, add_generation_prompt=conv["add_generation_prompt"], **kwargs)


def test_identified(family, text_tool):
    name, _, _, _ = family
    got = text_tool("identify-template", TEMPLATES / FAMILIES[name][0])
    assert got["family"] == family_of(name)


def test_render_equals_apply_chat_template(family, text_tool, tmp_path):
    name, template, path, ref = family
    template_file = TEMPLATES / FAMILIES[name][0]
    bos = FAMILIES[name][1]
    mismatches, tool_calls, tool_results, compared = [], 0, 0, 0
    for seed in range(CONVERSATIONS_PER_FAMILY):
        conv = conversation(family_of(name), seed)
        tool_calls += sum(len(m.get("tool_calls", [])) for m in conv["messages"])
        tool_results += sum(m["role"] == "tool" for m in conv["messages"])
        expected = reference(ref, template, conv)
        inp = tmp_path / f"conv{seed}.json"
        inp.write_text(json.dumps(conv, ensure_ascii=False), encoding="utf-8")
        got = text_tool("render-chat", path, inp, template_file, bos)
        if got["text"] != expected:
            mismatches.append((seed, expected, got["text"]))
            continue
        assert got["ids"] == ref(expected, add_special_tokens=False)["input_ids"], seed
        inc = got["incremental"]
        assert "error" not in inc, (seed, inc)
        msgs = conv["messages"]
        first = next((i for i, m in enumerate(msgs) if m["role"] == "assistant"), len(msgs))
        prompt = reference(ref, template, dict(conv, messages=msgs[:first], add_generation_prompt=True))
        prompt_ids = ref(prompt, add_special_tokens=False)["input_ids"]
        assert inc["turns"][0]["kind"] == "prompt"
        assert inc["ids"][:inc["turns"][0]["end"]] == prompt_ids, seed
        # The whole session equals the full rendering where the template keeps
        # every assistant body as sampled (not Qwen3, which drops earlier
        # thinking), the rendering ends where the session does, and each body
        # starts with a non-space (else "\n" + body may tokenize differently).
        ends_open = msgs[-1]["role"] != "assistant"
        bodies = [m["content"] for m in msgs if m["role"] == "assistant"]
        if family_of(name) != "qwen3" and ends_open == conv["add_generation_prompt"] and all(
                not b or not b[:1].isspace() for b in bodies):
            compared += 1
            assert inc["ids"] == got["ids"], seed
    assert not mismatches, "seed {}:\nexpected {!r}\ngot      {!r}".format(*mismatches[0])
    assert tool_calls >= 50 and tool_results >= 50
    assert family_of(name) == "qwen3" or compared >= 10


def test_bad_conversations_are_errors(family, text_tool, tmp_path):
    name, template, path, ref = family
    conv = {"messages": [], "tools": [], "add_generation_prompt": True}
    if name == "llama3.1":
        call = {"type": "function", "function": {"name": "a", "arguments": {}}}
        conv["messages"] = [{"role": "user", "content": "x"},
                            {"role": "assistant", "content": "", "tool_calls": [call, call]}]
        with pytest.raises(Exception, match="single tool-calls"):
            reference(ref, template, conv)
    inp = tmp_path / "bad.json"
    inp.write_text(json.dumps(conv))
    with pytest.raises(AssertionError, match="chat template"):
        text_tool("render-chat", path, inp, TEMPLATES / FAMILIES[name][0], FAMILIES[name][1])


def test_unknown_or_edited_template_is_refused(text_tool, tmp_path):
    for file, _, _, _ in FAMILIES.values():
        edited = tmp_path / ("edited-" + file)
        edited.write_text((TEMPLATES / file).read_text(encoding="utf-8").replace("<|im_end|>", "<|im_end|> ", 1)
                          .replace("Today Date", "Today  Date"), encoding="utf-8")
        with pytest.raises(AssertionError, match=r"edited-.*not one this renderer reproduces exactly"):
            text_tool("identify-template", edited)
    # A trailing newline after the last tag is dropped by trim_blocks: same template.
    plain = tmp_path / "qwen3-newline.jinja"
    plain.write_text((TEMPLATES / "qwen3.jinja").read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert text_tool("identify-template", plain)["family"] == "qwen3"


def test_model_dir_tokenizer_config(text_tool, train_tokenizer, tmp_path):
    template = (TEMPLATES / "llama3.1-instruct.jinja").read_text(encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": template, "bos_token": "<|begin_of_text|>"}), encoding="utf-8")
    got = text_tool("identify-template", tmp_path)
    assert got["family"] == "llama3.1" and got["bos_token"] == "<|begin_of_text|>"
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}))
    rendered = text_tool("render-chat", train_tokenizer("llama3"), conv, tmp_path)
    assert rendered["text"].startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>")
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}", encoding="utf-8")
    with pytest.raises(AssertionError, match="chat_template.jinja"):
        text_tool("identify-template", tmp_path)


def test_checkpoint_without_template_uses_the_builtin_format(text_tool, tmp_path):
    assert text_tool("identify-template", tmp_path)["family"] == "chatml-tools"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": None}), encoding="utf-8")
    assert text_tool("identify-template", tmp_path)["family"] == "chatml-tools"
