"""Combinatorial construction: 1 to 5 crawled operators stacked sequentially into one Model
whose shapes agree, each stage checked on meta tensors as it is added and the rendered
problem checked again on meta tensors before any real run. A seed fixes everything.
"""
from __future__ import annotations

import dataclasses
import random
import warnings

import torch

from .crawl import Crawl
from .identity import task_identity
from .ops import Recipe, Step
from .shapes import FAMILIES, NUM_EMBEDDINGS, family_shape, meta_apply

# Rationale: how often a role is drawn; anchors (GEMM, conv, norms) first and pointwise
# epilogues after them are the fusion patterns of KernelBench's level 2.
ROLE_WEIGHT = {"anchor": 3.0, "pointwise": 3.0, "reduce": 1.5, "reshape": 1.0}
FIRST_ROLE_WEIGHT = {"anchor": 8.0, "pointwise": 1.0, "reduce": 1.0, "reshape": 0.5}
# Rationale: most transformers recipes are one block per model family (seven RMSNorms, six
# gated MLPs); at full weight they made 36 of 60 sampled problems. 0.3 gives the group about
# the share of its distinct blocks.
TRANSFORMERS_WEIGHT = 0.3
# Rationale: 2^20 fp32 elements (4 MiB) per intermediate keeps a CPU forward in milliseconds;
# the GPU set raises it with --max-numel.
DEFAULT_MAX_NUMEL = 1 << 20
# Rationale: how many recipes one stage tries before the candidate is dropped as not composing.
TRIES_PER_STAGE = 12


@dataclasses.dataclass
class Problem:
    """A constructed problem: its source and what it is made of."""
    name: str
    source: str
    identity: str
    steps: list
    input_shape: tuple
    input_int: bool
    shapes: list                 # the tensor's shape after each stage
    level: int


def short(wraps: str) -> str:
    return wraps.rsplit(".", 1)[-1]


def render(steps: list, input_shape: tuple, input_int: bool) -> str:
    """The KernelBench-format source of the stacked steps."""
    names = [short(s.wraps) for s in steps]
    level = 1 if len(steps) == 1 else 2
    wraps = ", ".join(dict.fromkeys(s.wraps for s in steps))
    lines = [f'"""Level {level}: {" -> ".join(names)}. Synthesized by caf_agent_data from {wraps}."""',
             "import torch", "import torch.nn as nn", "import torch.nn.functional as F",
             *dict.fromkeys(line for s in steps for line in s.imports), "", "",
             "class Model(nn.Module):", "    def __init__(self):", "        super().__init__()"]
    for i, s in enumerate(steps):
        if s.kind == "module":
            lines.append(f"        self.op{i} = {s.code}")
    lines += ["", "    def forward(self, x):"]
    for i, s in enumerate(steps):
        expr = s.call.format(m=f"self.op{i}", x="x") if s.kind == "module" else s.code.format(x="x")
        lines.append(f"        x = {expr}")
    lines += ["        return x", "", ""]
    if input_int:
        lines.append(f"NUM_EMBEDDINGS = {NUM_EMBEDDINGS}")
    lines += [f"batch_size = {input_shape[0]}", f"input_shape = {tuple(input_shape[1:])!r}", "", "",
              "def get_inputs():"]
    if input_int:
        lines.append("    return [torch.randint(0, NUM_EMBEDDINGS, (batch_size, *input_shape))]")
    else:
        lines.append("    return [torch.randn(batch_size, *input_shape)]")
    lines += ["", "", "def get_init_inputs():", "    return []", ""]
    return "\n".join(lines)


def check_on_meta(source: str) -> tuple[list | None, str | None]:
    """(output shapes, None) when the problem builds and runs on meta tensors, else (None,
    reason). Nothing is allocated and no kernel runs."""
    ns: dict = {"__name__": "caf_meta_check"}
    try:
        with warnings.catch_warnings(), torch.device("meta"), torch.no_grad():
            warnings.simplefilter("ignore")
            exec(compile(source, "<problem>", "exec"), ns)  # noqa: S102 -- our own rendered text
            model = ns["Model"](*ns["get_init_inputs"]()).eval()
            out = model(*ns["get_inputs"]())
    except Exception as e:
        return None, f"fails on meta tensors: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    outs = out if isinstance(out, (tuple, list)) else [out]
    return [tuple(o.shape) for o in outs if isinstance(o, torch.Tensor)], None


def _pick(rng: random.Random, recipes: list, weights: dict) -> Recipe:
    return rng.choices(recipes, weights=[weights[r.role] * (TRANSFORMERS_WEIGHT if r.wraps.startswith("transformers.")
                                                            else 1.0) for r in recipes])[0]


def compose(crawl: Crawl, rng: random.Random, n_ops: int, family: str | None = None, scale: int = 1,
            max_numel: int = DEFAULT_MAX_NUMEL, batch_scale: int = 1) -> tuple[Problem | None, str]:
    """One problem of n_ops stages (1-5) or (None, why it did not compose)."""
    if not 1 <= n_ops <= 5:
        raise ValueError(f"n_ops must be 1 to 5, got {n_ops}")
    family = family or rng.choice([f for f in FAMILIES if f != "int"] * 4 + ["int"])
    shape = family_shape(family, rng, scale, batch_scale)
    is_int = family == "int"
    start, steps, shapes = shape, [], []
    for stage in range(n_ops):
        first = stage == 0
        pool = [r for r in crawl.recipes if r.int_input == (is_int and first)
                and (f"{len(shape)}d" in crawl.families.get(r.wraps, []) or (is_int and first))]
        if not pool:
            return None, f"no operator takes shape {list(shape)} at stage {stage + 1}"
        last = "no recipe applies"
        for _ in range(TRIES_PER_STAGE):
            rec = _pick(rng, pool, FIRST_ROLE_WEIGHT if first else ROLE_WEIGHT)
            step = rec.build(shape, rng)
            if step is None:
                continue
            if steps and step.wraps == steps[-1].wraps:
                last = "the same operator twice in a row"
                continue
            try:
                out = meta_apply(step, shape, is_int=is_int and first)
            except Exception as e:
                last = f"{short(rec.wraps)} on {list(shape)}: {type(e).__name__}"
                continue
            numel = 1
            for d in out:
                numel *= d
            if numel == 0 or numel > max_numel:
                last = f"{short(rec.wraps)} gives {list(out)} ({numel} elements, max {max_numel})"
                continue
            break
        else:
            return None, f"shapes do not compose at stage {stage + 1}: {last}"
        steps.append(step)
        shapes.append(out)
        shape = out
    source = render(steps, start, is_int)
    outs, why = check_on_meta(source)
    if why:
        return None, why
    if outs != [tuple(shapes[-1])]:
        return None, f"the rendered problem gives {outs} on meta tensors, the stages gave {shapes[-1]}"
    ident = task_identity(source)
    name = "_".join(short(s.wraps).lower() for s in steps)[:60] + "_" + ident[:8]
    return Problem(name, source, ident, steps, start, is_int, shapes, 1 if n_ops == 1 else 2), ""


def seed_problems(crawl: Crawl, seed: int, scale: int = 1) -> list:
    """Every kept recipe as a one-operator problem, on a shape family it runs on."""
    rng = random.Random(seed)
    out = []
    for rec in crawl.recipes:
        fams = crawl.families[rec.wraps]
        for _ in range(TRIES_PER_STAGE):
            p, _why = compose(Crawl([rec], crawl.families, []), rng, 1, rng.choice(fams), scale)
            if p is not None:
                out.append(p)
                break
    return out
