"""Operator recipes: how to instantiate one torch operator for a given input shape.

A recipe looks at the shape of the tensor flowing into it (batch first) and either declines
(None: it does not apply to that shape) or returns a Step: the source of one stage of a
Model (a module constructor, or a call expression on `x`) and what it wraps. Whether the step
really accepts the shape is not trusted to the recipe: compose.py runs it on meta tensors.

Parameters drawn by a recipe (channels, kernel sizes) come from the caller's random.Random,
so a seed fixes them.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Callable


@dataclasses.dataclass(frozen=True)
class Step:
    """One stage of a Model. kind 'module': `code` is a constructor expression (e.g.
    "nn.Conv2d(8, 16, kernel_size=3)") and `call` how forward applies it ({m}: the module,
    {x}: the input); kind 'call': `code` is an expression of {x}. `imports`: the import
    lines the code needs beyond torch, nn and F (the transformers blocks)."""
    wraps: str
    kind: str
    code: str
    call: str = "{m}({x})"
    imports: tuple = ()


@dataclasses.dataclass(frozen=True)
class Recipe:
    """An operator and how to build it for a shape; role is one of anchor (GEMM, conv,
    norm, recurrent, attention: the stages fusion is built around), pointwise, reduce,
    reshape. int_input: it takes an int64 index tensor (embeddings) rather than floats."""
    wraps: str
    role: str
    build: Callable[[tuple, random.Random], "Step | None"]
    int_input: bool = False


def _spatial(shape: tuple) -> tuple:
    return tuple(shape[2:])


def _mod(wraps: str, code: str, call: str = "{m}({x})") -> Step:
    return Step(wraps, "module", code, call)


def no_arg_module(name: str, ranks: tuple | None = None) -> Callable:
    """nn.<name>() for any shape (or the given ranks)."""
    def build(shape, rng):
        if ranks and len(shape) not in ranks:
            return None
        return _mod(f"torch.nn.{name}", f"nn.{name}()")
    return build


def _conv(name: str, n: int, transpose: bool):
    def build(shape, rng):
        if len(shape) != n + 2 or min(_spatial(shape)) < 3:
            return None
        c_in = shape[1]
        c_out = rng.choice([4, 8] if n == 3 else [8, 16, 32])
        k = rng.choice([k for k in (1, 3, 5) if k <= min(_spatial(shape))])
        stride = rng.choice([1, 1, 2])
        pad = rng.choice([0, k // 2])
        extra = f", output_padding={stride - 1}" if transpose and stride > 1 else ""
        return _mod(f"torch.nn.{name}",
                    f"nn.{name}({c_in}, {c_out}, kernel_size={k}, stride={stride}, padding={pad}{extra})")
    return build


def _channels(name: str, ranks: tuple, fmt: str = "nn.{name}({c})"):
    def build(shape, rng):
        if len(shape) not in ranks:
            return None
        return _mod(f"torch.nn.{name}", fmt.format(name=name, c=shape[1]))
    return build


def _last_dim(name: str, min_rank: int = 2):
    def build(shape, rng):
        if len(shape) < min_rank:
            return None
        return _mod(f"torch.nn.{name}", f"nn.{name}({shape[-1]})")
    return build


def _linear(shape, rng):
    if len(shape) < 2:
        return None
    return _mod("torch.nn.Linear", f"nn.Linear({shape[-1]}, {rng.choice([32, 64, 128, 256])})")


def _group_norm(shape, rng):
    if len(shape) < 3:
        return None
    groups = [g for g in (2, 4, 8) if shape[1] % g == 0]
    if not groups:
        return None
    return _mod("torch.nn.GroupNorm", f"nn.GroupNorm({rng.choice(groups)}, {shape[1]})")


def _pool(name: str, n: int):
    def build(shape, rng):
        if len(shape) != n + 2 or min(_spatial(shape)) < 2:
            return None
        k = rng.choice([k for k in (2, 3) if k <= min(_spatial(shape))])
        lp = "2, " if name.startswith("LP") else ""
        return _mod(f"torch.nn.{name}", f"nn.{name}({lp}kernel_size={k}, stride={rng.choice([k, 2])})")
    return build


def _adaptive(name: str, n: int):
    def build(shape, rng):
        if len(shape) != n + 2:
            return None
        out = rng.choice([o for o in (1, 2, 4) if o <= min(_spatial(shape))] or [1])
        return _mod(f"torch.nn.{name}", f"nn.{name}({out})")
    return build


def _pad(name: str, n: int, value: str = ""):
    def build(shape, rng):
        if len(shape) != n + 2 or min(_spatial(shape)) < 3:
            return None
        return _mod(f"torch.nn.{name}", f"nn.{name}({rng.choice([1, 2])}{value})")
    return build


def _upsample(shape, rng):
    if len(shape) not in (3, 4, 5):
        return None
    mode = rng.choice({3: ["nearest", "linear"], 4: ["nearest", "bilinear"], 5: ["nearest"]}[len(shape)])
    corners = "" if mode == "nearest" else ", align_corners=False"
    return _mod("torch.nn.Upsample", f"nn.Upsample(scale_factor=2, mode={mode!r}{corners})")


def _dim_module(name: str, min_rank: int = 2):
    def build(shape, rng):
        if len(shape) < min_rank:
            return None
        return _mod(f"torch.nn.{name}", f"nn.{name}(dim={rng.choice([1, -1])})")
    return build


def _args_module(name: str, args: list):
    """nn.<name>(<one of args>) for any shape."""
    def build(shape, rng):
        return _mod(f"torch.nn.{name}", f"nn.{name}({rng.choice(args)})")
    return build


def _pixel_shuffle(shape, rng):
    if len(shape) != 4 or shape[1] % 4:
        return None
    return _mod("torch.nn.PixelShuffle", "nn.PixelShuffle(2)")


def _pixel_unshuffle(shape, rng):
    if len(shape) != 4 or shape[2] % 2 or shape[3] % 2:
        return None
    return _mod("torch.nn.PixelUnshuffle", "nn.PixelUnshuffle(2)")


def _channel_shuffle(shape, rng):
    if len(shape) < 3 or shape[1] % 2:
        return None
    return _mod("torch.nn.ChannelShuffle", "nn.ChannelShuffle(2)")


def _rnn(name: str):
    def build(shape, rng):
        if len(shape) != 3:
            return None
        return _mod(f"torch.nn.{name}", f"nn.{name}({shape[-1]}, {rng.choice([32, 64])}, batch_first=True)",
                    "{m}({x})[0]")
    return build


def _heads(e: int) -> list:
    return [h for h in (2, 4) if e % h == 0]


def _attention(shape, rng):
    if len(shape) != 3 or not _heads(shape[-1]):
        return None
    return _mod("torch.nn.MultiheadAttention",
                f"nn.MultiheadAttention({shape[-1]}, {rng.choice(_heads(shape[-1]))}, batch_first=True)",
                "{m}({x}, {x}, {x}, need_weights=False)[0]")


def _encoder_layer(name: str, call: str):
    def build(shape, rng):
        if len(shape) != 3 or not _heads(shape[-1]):
            return None
        e = shape[-1]
        return _mod(f"torch.nn.{name}", f"nn.{name}({e}, {rng.choice(_heads(e))}, "
                    f"dim_feedforward={2 * e}, batch_first=True)", call)
    return build


def _unfold(shape, rng):
    if len(shape) != 4 or min(_spatial(shape)) < 3:
        return None
    return _mod("torch.nn.Unfold", f"nn.Unfold(kernel_size={rng.choice([2, 3])})")


def _embedding(name: str, extra: str = ""):
    def build(shape, rng):
        return _mod(f"torch.nn.{name}", f"nn.{name}(NUM_EMBEDDINGS, {rng.choice([32, 64])}{extra})")
    return build


def _functional(fn: str, tail: str = "", min_rank: int = 1):
    """F.<fn>(x<tail>) for shapes of at least min_rank."""
    def build(shape, rng):
        if len(shape) < min_rank:
            return None
        return Step(f"torch.nn.functional.{fn}", "call", f"F.{fn}({{x}}{tail})")
    return build


def _torch_call(wraps: str, template: str, min_rank: int = 2, consts: list | None = None):
    """A torch expression of {x}; {c} is drawn from consts."""
    def build(shape, rng):
        if len(shape) < min_rank:
            return None
        c = rng.choice(consts) if consts else None
        return Step(wraps, "call", template.replace("{c}", repr(c)) if consts else template)
    return build


_NO_ARG_POINTWISE = ["ReLU", "ReLU6", "GELU", "SiLU", "Mish", "Sigmoid", "Tanh", "Hardtanh",
                     "Hardswish", "Hardsigmoid", "SELU", "Softsign", "Tanhshrink", "LogSigmoid",
                     "PReLU"]


def module_recipes() -> dict:
    """torch.nn classes with a shape-aware recipe, by class name."""
    r: dict = {n: Recipe(f"torch.nn.{n}", "pointwise", no_arg_module(n)) for n in _NO_ARG_POINTWISE}
    r.update({
        "LeakyReLU": Recipe("torch.nn.LeakyReLU", "pointwise", _args_module("LeakyReLU", ["0.01", "0.1", "0.2"])),
        "ELU": Recipe("torch.nn.ELU", "pointwise", _args_module("ELU", ["alpha=1.0", "alpha=0.5"])),
        "CELU": Recipe("torch.nn.CELU", "pointwise", _args_module("CELU", ["alpha=1.0", "alpha=2.0"])),
        "Softplus": Recipe("torch.nn.Softplus", "pointwise", _args_module("Softplus", ["beta=1.0", "beta=2.0"])),
        "Softshrink": Recipe("torch.nn.Softshrink", "pointwise", _args_module("Softshrink", ["0.5", "0.25"])),
        "Hardshrink": Recipe("torch.nn.Hardshrink", "pointwise", _args_module("Hardshrink", ["0.5", "0.25"])),
        "Threshold": Recipe("torch.nn.Threshold", "pointwise", _args_module("Threshold", ["0.1, 0.0", "0.5, -1.0"])),
        "RReLU": Recipe("torch.nn.RReLU", "pointwise", no_arg_module("RReLU")),
        "GLU": Recipe("torch.nn.GLU", "pointwise", lambda s, g: _mod("torch.nn.GLU", "nn.GLU(dim=-1)") if s[-1] % 2 == 0 else None),
        "Softmax": Recipe("torch.nn.Softmax", "reduce", _dim_module("Softmax")),
        "LogSoftmax": Recipe("torch.nn.LogSoftmax", "reduce", _dim_module("LogSoftmax")),
        "Softmin": Recipe("torch.nn.Softmin", "reduce", _dim_module("Softmin")),
        "Softmax2d": Recipe("torch.nn.Softmax2d", "reduce", no_arg_module("Softmax2d", (4,))),
        "Linear": Recipe("torch.nn.Linear", "anchor", _linear),
        "LayerNorm": Recipe("torch.nn.LayerNorm", "anchor", _last_dim("LayerNorm")),
        "RMSNorm": Recipe("torch.nn.RMSNorm", "anchor", _last_dim("RMSNorm")),
        "GroupNorm": Recipe("torch.nn.GroupNorm", "anchor", _group_norm),
        "LocalResponseNorm": Recipe("torch.nn.LocalResponseNorm", "anchor", lambda s, g: _mod(
            "torch.nn.LocalResponseNorm", f"nn.LocalResponseNorm({g.choice([2, 3, 5])})") if len(s) >= 3 else None),
        "Flatten": Recipe("torch.nn.Flatten", "reshape", no_arg_module("Flatten", (3, 4, 5))),
        "Upsample": Recipe("torch.nn.Upsample", "reshape", _upsample),
        "PixelShuffle": Recipe("torch.nn.PixelShuffle", "reshape", _pixel_shuffle),
        "PixelUnshuffle": Recipe("torch.nn.PixelUnshuffle", "reshape", _pixel_unshuffle),
        "ChannelShuffle": Recipe("torch.nn.ChannelShuffle", "reshape", _channel_shuffle),
        "Unfold": Recipe("torch.nn.Unfold", "reshape", _unfold),
        "MultiheadAttention": Recipe("torch.nn.MultiheadAttention", "anchor", _attention),
        "TransformerEncoderLayer": Recipe("torch.nn.TransformerEncoderLayer", "anchor",
                                          _encoder_layer("TransformerEncoderLayer", "{m}({x})")),
        "TransformerDecoderLayer": Recipe("torch.nn.TransformerDecoderLayer", "anchor",
                                          _encoder_layer("TransformerDecoderLayer", "{m}({x}, {x})")),
        "Embedding": Recipe("torch.nn.Embedding", "anchor", _embedding("Embedding"), int_input=True),
        "EmbeddingBag": Recipe("torch.nn.EmbeddingBag", "anchor", _embedding("EmbeddingBag", ", mode='mean'"),
                               int_input=True),
    })
    for n in (1, 2, 3):
        for base, transpose in (("Conv", False), ("ConvTranspose", True)):
            r[f"{base}{n}d"] = Recipe(f"torch.nn.{base}{n}d", "anchor", _conv(f"{base}{n}d", n, transpose))
        for base in ("BatchNorm", "InstanceNorm"):
            ranks = (2, 3) if (n == 1 and base == "BatchNorm") else (n + 2,)
            fmt = "nn.{name}({c})" if base == "BatchNorm" else "nn.{name}({c}, affine=True)"
            r[f"{base}{n}d"] = Recipe(f"torch.nn.{base}{n}d", "anchor", _channels(f"{base}{n}d", ranks, fmt))
        for base in ("MaxPool", "AvgPool", "LPPool"):
            r[f"{base}{n}d"] = Recipe(f"torch.nn.{base}{n}d", "reduce", _pool(f"{base}{n}d", n))
        for base in ("AdaptiveAvgPool", "AdaptiveMaxPool"):
            r[f"{base}{n}d"] = Recipe(f"torch.nn.{base}{n}d", "reduce", _adaptive(f"{base}{n}d", n))
        for base, value in (("ZeroPad", ""), ("ConstantPad", ", 0.5"), ("ReflectionPad", ""),
                            ("ReplicationPad", ""), ("CircularPad", "")):
            r[f"{base}{n}d"] = Recipe(f"torch.nn.{base}{n}d", "reshape", _pad(f"{base}{n}d", n, value))
    for name in ("LSTM", "GRU", "RNN"):
        r[name] = Recipe(f"torch.nn.{name}", "anchor", _rnn(name))
    return r


#: torch.nn classes the crawl does not turn into problems, with the reason.
MODULE_EXCLUDED = {
    "Identity": "identity (no computation)",
    "Dropout": "identity at evaluation (the judge runs Model in eval mode)",
    "Dropout1d": "identity at evaluation (the judge runs Model in eval mode)",
    "Dropout2d": "identity at evaluation (the judge runs Model in eval mode)",
    "Dropout3d": "identity at evaluation (the judge runs Model in eval mode)",
    "AlphaDropout": "identity at evaluation (the judge runs Model in eval mode)",
    "FeatureAlphaDropout": "identity at evaluation (the judge runs Model in eval mode)",
    "SyncBatchNorm": "needs a distributed process group",
    "Transformer": "takes two inputs (src, tgt); its encoder and decoder layers are crawled",
    "Module": "base class, not an operator",
    "Container": "container, not an operator",
    "Sequential": "container, not an operator",
    "ModuleList": "container, not an operator",
    "ModuleDict": "container, not an operator",
    "ParameterList": "container, not an operator",
    "ParameterDict": "container, not an operator",
    "Parameter": "a tensor, not an operator",
    "UninitializedParameter": "a tensor, not an operator",
    "UninitializedBuffer": "a tensor, not an operator",
    "Buffer": "a tensor, not an operator",
}

#: torch.nn.functional ops with a recipe (arguments the generic probe cannot guess).
FUNCTIONAL_RECIPES = {
    "softmax": Recipe("torch.nn.functional.softmax", "reduce", _functional("softmax", ", dim=-1")),
    "log_softmax": Recipe("torch.nn.functional.log_softmax", "reduce", _functional("log_softmax", ", dim=-1")),
    "softmin": Recipe("torch.nn.functional.softmin", "reduce", _functional("softmin", ", dim=-1")),
    "normalize": Recipe("torch.nn.functional.normalize", "reduce", _functional("normalize", ", dim=1", 2)),
    "glu": Recipe("torch.nn.functional.glu", "pointwise",
                  lambda s, g: Step("torch.nn.functional.glu", "call", "F.glu({x}, dim=-1)") if s[-1] % 2 == 0 else None),
    "leaky_relu": Recipe("torch.nn.functional.leaky_relu", "pointwise", _functional("leaky_relu", ", 0.1")),
    "gelu": Recipe("torch.nn.functional.gelu", "pointwise",
                   lambda s, g: Step("torch.nn.functional.gelu", "call", f"F.gelu({{x}}, approximate={g.choice(['none', 'tanh'])!r})")),
}

#: torch.nn.functional names the crawl skips, with the reason.
FUNCTIONAL_EXCLUDED = {
    **{n: "samples random numbers (the judge needs a deterministic reference)" for n in
       ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
        "gumbel_softmax", "rrelu", "rrelu_")},
    **{n: "in-place variant (its out-of-place form is crawled)" for n in
       ("relu_", "elu_", "leaky_relu_", "hardtanh_", "threshold_", "celu_", "selu_")},
}

#: torch reductions and arithmetic stages (the epilogues of KernelBench's level 2).
TORCH_RECIPES = [
    Recipe("torch.sum", "reduce", _torch_call("torch.sum", "torch.sum({x}, dim={c}, keepdim=True)", consts=[1, -1])),
    Recipe("torch.mean", "reduce", _torch_call("torch.mean", "torch.mean({x}, dim={c}, keepdim=True)", consts=[1, -1])),
    Recipe("torch.amax", "reduce", _torch_call("torch.amax", "torch.amax({x}, dim={c}, keepdim=True)", consts=[1, -1])),
    Recipe("torch.logsumexp", "reduce", _torch_call("torch.logsumexp", "torch.logsumexp({x}, dim={c}, keepdim=True)", consts=[1, -1])),
    Recipe("torch.cumsum", "reduce", _torch_call("torch.cumsum", "torch.cumsum({x}, dim={c})", consts=[1, -1])),
    Recipe("torch.mul", "pointwise", _torch_call("torch.mul", "{x} * {c}", 1, [0.5, 1.5, 2.0])),
    Recipe("torch.add", "pointwise", _torch_call("torch.add", "{x} + {c}", 1, [0.1, 0.5, 1.0])),
    Recipe("torch.clamp", "pointwise", _torch_call("torch.clamp", "torch.clamp({x}, min=-{c}, max={c})", 1, [0.5, 1.0])),
    Recipe("torch.tanh", "pointwise", _torch_call("torch.tanh", "{x} + torch.tanh({x}) * {c}", 1, [0.5, 1.0])),
]
