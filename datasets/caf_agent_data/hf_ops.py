"""The transformers part of the seed crawl: the activation classes of
`transformers.activations` and the building blocks (norms, MLPs, attention, layers) defined in
the modeling modules of a few model families, each built from a small config made in the
problem file itself. Nothing is downloaded: a config is constructed from keyword arguments,
never read from a hub, and no `from_pretrained` is ever written.

A class is taken when it constructs from (config), (config, layer_idx), (config,
intermediate_size) or (hidden_size / dim), and its forward runs on a (batch, seq, hidden)
meta tensor alone; otherwise it is skipped with the reason (most attention and decoder
layers want position embeddings or a mask as a second input).
"""
from __future__ import annotations

import importlib
import inspect
import warnings

import torch
import torch.nn as nn

from .ops import Recipe, Step

#: Model families whose modeling module is crawled, with the config class and how its sizes
#: are named (hidden, intermediate, heads, key/value heads, head dim).
# Rationale: the decoder families the paper's tasks draw from (Llama, Qwen, Mistral, Gemma,
# Phi) plus the encoder and seq2seq classics (BERT, T5, GPT-2, ViT); a wider list costs crawl
# time and adds mostly renamed copies of the same blocks.
FAMILIES = {
    "llama": ("LlamaConfig", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim"),
    "qwen2": ("Qwen2Config", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", None),
    "qwen3": ("Qwen3Config", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim"),
    "mistral": ("MistralConfig", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim"),
    "gemma": ("GemmaConfig", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim"),
    "phi3": ("Phi3Config", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", None),
    "bert": ("BertConfig", "hidden_size", "intermediate_size", "num_attention_heads", None, None),
    "t5": ("T5Config", "d_model", "d_ff", "num_heads", None, "d_kv"),
    "gpt2": ("GPT2Config", "n_embd", "n_inner", "n_head", None, None),
    "vit": ("ViTConfig", "hidden_size", "intermediate_size", "num_attention_heads", None, None),
}

#: Name endings of whole models, heads and embeddings: not one operator on a hidden-state tensor.
_NOT_BLOCKS = ("Model", "PreTrainedModel", "Embedding", "Embeddings", "Head", "Heads", "Pooler", "Stack",
               "Encoder", "Decoder", "Summary")


#: transformers activations the crawl skips, with the reason.
ACTIVATION_EXCLUDED = {
    "LinearActivation": "identity (no computation)",
    "XIELUActivation": "experimental: without its optional CUDA package it prints install advice at every construction",
}


def _heads(h: int) -> list:
    return [n for n in (2, 4) if h % n == 0]


def config_code(family: str, h: int, heads: int) -> str:
    """The constructor expression of a small config of the family for hidden size h."""
    cls, hid, inter, nh, nkv, hd = FAMILIES[family]
    kw = [f"{hid}={h}", f"{inter}={2 * h}", f"{nh}={heads}"]
    if nkv:
        kw.append(f"{nkv}={heads}")
    if hd:
        kw.append(f"{hd}={h // heads}")
    # Rationale: the plain PyTorch attention path, the same on every device and version
    # (a config made outside from_pretrained has no implementation chosen).
    kw.append("attn_implementation='eager'")
    return f"{cls}({', '.join(kw)})"


def _block_recipe(family: str, name: str, ctor: str, call: str) -> Recipe:
    mod = f"transformers.models.{family}.modeling_{family}"
    imports = (f"from {mod} import {name}",) + \
        ((f"from transformers import {FAMILIES[family][0]}",) if "{config}" in ctor else ())
    role = "pointwise" if name.endswith(("Activation",)) else "anchor"

    def build(shape, rng):
        if len(shape) != 3 or not _heads(shape[-1]):
            return None
        h = shape[-1]
        code = ctor.format(config=config_code(family, h, rng.choice(_heads(h))), h=h, i=2 * h)
        return Step(f"{mod}.{name}", "module", code, call, imports)
    return Recipe(f"{mod}.{name}", role, build)


def _constructor(cls) -> tuple[str | None, str]:
    """A constructor template ({config}, {h}, {i}) for the class, or (None, why)."""
    try:
        params = [p for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return None, "its constructor has no readable signature"
    required = [p.name for p in params if p.default is p.empty]
    known = {"config": "{config}", "hidden_size": "{h}", "dim": "{h}", "layer_idx": "0",
             "intermediate_size": "{i}"}
    if not required:
        return "()", ""
    unknown = [r for r in required if r not in known]
    if unknown:
        return None, f"needs constructor arguments the crawl does not know ({', '.join(unknown)})"
    return "(" + ", ".join(known[r] for r in required) + ")", ""


def _probe_call(step: Step) -> tuple[str | None, str]:
    """The call form ({m}({x}) or {m}({x})[0]) the block's forward gives one tensor with, on
    a (2, 8, 16) meta tensor; (None, why) when neither."""
    from .shapes import step_namespace
    ns = step_namespace()
    try:
        with warnings.catch_warnings(), torch.device("meta"), torch.no_grad():
            warnings.simplefilter("ignore")
            for line in step.imports:
                exec(line, ns)  # noqa: S102 -- our own import lines
            m = eval(step.code, ns).eval()  # noqa: S307 -- our own recipe text
            y = m(torch.randn(2, 8, 16))
    except Exception as e:
        msg = str(e).splitlines()[0][:160] if str(e) else ""
        return None, f"forward on one hidden-state tensor fails: {type(e).__name__}: {msg}"
    if isinstance(y, torch.Tensor):
        return "{m}({x})", ""
    if isinstance(y, (tuple, list)) and y and isinstance(y[0], torch.Tensor):
        return "{m}({x})[0]", ""
    return None, f"forward returns a {type(y).__name__}, not a tensor"


def crawl_transformers() -> tuple[list, list]:
    """(recipes, skipped as (wraps, reason)) for the transformers activations and the blocks
    of FAMILIES. A missing or broken transformers installation skips it all with the reason."""
    try:
        import transformers
        from transformers import activations
    except Exception as e:  # an incompatible install raises anything at import
        return [], [("transformers", f"cannot be imported: {type(e).__name__}: {e}")]
    recipes, skipped = [], []
    for name in sorted(dir(activations)):
        cls = getattr(activations, name)
        if not (inspect.isclass(cls) and issubclass(cls, nn.Module)) or cls.__module__ != activations.__name__:
            continue
        wraps = f"transformers.activations.{name}"
        if name in ACTIVATION_EXCLUDED:
            skipped.append((wraps, ACTIVATION_EXCLUDED[name]))
            continue
        ctor, why = _constructor(cls)
        if ctor != "()":
            skipped.append((wraps, why or "needs constructor arguments"))
            continue
        recipes.append(Recipe(wraps, "pointwise", _activation(name)))
    for family in FAMILIES:
        modname = f"transformers.models.{family}.modeling_{family}"
        try:
            mod = importlib.import_module(modname)
        except Exception as e:
            skipped.append((modname, f"cannot be imported: {type(e).__name__}: {e}"))
            continue
        for name, cls in sorted(vars(mod).items()):
            if not (inspect.isclass(cls) and issubclass(cls, nn.Module)) or cls.__module__ != modname:
                continue
            wraps = f"{modname}.{name}"
            if name.endswith(_NOT_BLOCKS) or "For" in name or "Rotary" in name:
                skipped.append((wraps, "a whole model, head or embedding, not a block on hidden states"))
                continue
            ctor, why = _constructor(cls)
            if ctor is None:
                skipped.append((wraps, why))
                continue
            rec = _block_recipe(family, name, name + ctor, "{m}({x})")
            step = rec.build((2, 8, 16), __import__("random").Random(0))
            call, why = _probe_call(step)
            if call is None:
                skipped.append((wraps, why))
                continue
            recipes.append(_block_recipe(family, name, name + ctor, call))
    del transformers
    return recipes, skipped


def _activation(name: str):
    def build(shape, rng):
        return Step(f"transformers.activations.{name}", "module", f"{name}()", "{m}({x})",
                    (f"from transformers.activations import {name}",))
    return build
