"""Input shape families and running one Step on meta tensors (no memory, no compute).

Shapes are batch first. Sizes are small so that the problems of the bundled sample run on a
CPU in milliseconds; --scale in the pipeline multiplies the non-batch sizes for a GPU set.
"""
from __future__ import annotations

import random
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from .ops import Step

#: The vocabulary of embedding problems (module constant NUM_EMBEDDINGS in the problem).
NUM_EMBEDDINGS = 1000

# Rationale: one small shape per rank to probe whether an operator runs at all (the crawl);
# the composition draws its own sizes from FAMILIES.
PROBE_SHAPES = {"2d": (4, 32), "3d": (2, 8, 16), "4d": (2, 8, 8, 8), "5d": (2, 4, 4, 4, 4), "int": (4, 16)}


def family_shape(family: str, rng: random.Random, scale: int = 1, batch_scale: int = 1) -> tuple:
    """A drawn input shape of a family; batch first (times batch_scale), non-batch sizes
    times scale. The draws do not depend on the scales, so a seed gives the same problems
    at every size."""
    shape = _family_shape(family, rng, scale)
    return (shape[0] * batch_scale,) + tuple(shape[1:])


def _family_shape(family: str, rng: random.Random, scale: int) -> tuple:
    s = scale
    if family == "2d":
        return (rng.choice([8, 16, 32]), rng.choice([64, 128, 256]) * s)
    if family == "3d":
        return (rng.choice([4, 8]), rng.choice([8, 16, 32]), rng.choice([32, 64, 128]) * s)
    if family == "4d":
        side = rng.choice([8, 16, 32]) * s
        return (rng.choice([2, 4]), rng.choice([4, 8, 16]), side, side)
    if family == "5d":
        side = rng.choice([4, 8]) * s
        return (2, rng.choice([4, 8]), side, side, side)
    if family == "int":
        return (rng.choice([8, 16]), rng.choice([16, 32, 64]) * s)
    raise ValueError(f"unknown shape family {family!r} (known: {sorted(PROBE_SHAPES)})")


FAMILIES = ("2d", "3d", "4d", "5d", "int")


def step_namespace() -> dict:
    """The names a Step's code may use (the problem file imports the same)."""
    return {"torch": torch, "nn": nn, "F": F, "NUM_EMBEDDINGS": NUM_EMBEDDINGS}


def meta_apply(step: Step, shape: tuple, is_int: bool = False) -> tuple:
    """The output shape of `step` on an input of `shape`, computed on meta tensors; raises
    what the operator raises when the shape does not fit, ValueError when it returns no
    single floating-point tensor."""
    ns = step_namespace()
    with warnings.catch_warnings(), torch.device("meta"), torch.no_grad():
        warnings.simplefilter("ignore")
        if is_int:
            x = torch.randint(0, NUM_EMBEDDINGS, shape)
        else:
            x = torch.randn(shape)
        for line in step.imports:
            exec(line, ns)  # noqa: S102 -- our own import lines
        if step.kind == "module":
            ns["_m"] = eval(step.code, ns).eval()  # noqa: S307 -- our own recipe text
            y = eval(step.call.format(m="_m", x="_x"), dict(ns, _x=x))  # noqa: S307
        else:
            y = eval(step.code.format(x="_x"), dict(ns, _x=x))  # noqa: S307
    if not isinstance(y, torch.Tensor):
        raise ValueError(f"returns a {type(y).__name__}, not a tensor")
    if not y.is_floating_point():
        raise ValueError(f"returns {y.dtype}, not a floating-point tensor")
    return tuple(y.shape)
