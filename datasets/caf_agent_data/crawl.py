"""Seed crawl: torch.nn operator classes, torch.nn.functional ops and a few torch reductions
as recipes, each probed on meta tensors. What does not construct or run is skipped with the
reason; seed_problems() renders every kept recipe as a one-operator KernelBench problem.
"""
from __future__ import annotations

import dataclasses
import inspect
import random
import warnings

import torch.nn as nn
import torch.nn.functional as F

from .ops import (FUNCTIONAL_EXCLUDED, FUNCTIONAL_RECIPES, MODULE_EXCLUDED, TORCH_RECIPES, Recipe,
                  module_recipes, no_arg_module, _functional)
from .shapes import PROBE_SHAPES, meta_apply


@dataclasses.dataclass
class Crawl:
    """Kept recipes (each with the shape families it ran on) and skipped operators as
    (wraps, reason)."""
    recipes: list
    families: dict           # wraps -> families its probe ran on
    skipped: list


def _error(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def probe(recipe: Recipe) -> tuple[list, str]:
    """(families the recipe runs on, the last failure reason) on the probe shapes."""
    ok, last = [], "applies to no probe shape"
    for fam, shape in PROBE_SHAPES.items():
        if (fam == "int") != recipe.int_input:
            continue
        try:
            step = recipe.build(shape, random.Random(0))
            if step is None:
                continue
            meta_apply(step, shape, is_int=recipe.int_input)
            ok.append(fam)
        except Exception as e:  # an operator may raise anything for a shape it refuses
            last = _error(e)
    return ok, last


def _nn_classes() -> list:
    out = []
    for name in sorted(dir(nn)):
        obj = getattr(nn, name)
        if inspect.isclass(obj) and issubclass(obj, nn.Module) and not name.startswith("_"):
            out.append(name)
    return out


def _generic_module(name: str) -> tuple[Recipe | None, str]:
    """A recipe for a class without one: constructed with no arguments."""
    cls = getattr(nn, name)
    if name.startswith("Lazy"):
        return None, "lazy module (its shapes are fixed at the first call)"
    if name.endswith("Loss"):
        return None, "a loss (takes a prediction and a target, not one input)"
    try:
        sig = inspect.signature(cls.__init__)
        required = [p for p in list(sig.parameters.values())[1:]
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        required = []
    if required:
        return None, "fails to construct without arguments and has no recipe (needs " + \
            ", ".join(p.name for p in required) + ")"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cls()
    except Exception as e:
        return None, f"fails to construct: {_error(e)}"
    return Recipe(f"torch.nn.{name}", "pointwise", no_arg_module(name)), ""


def _generic_functional(name: str) -> tuple[Recipe | None, str]:
    fn = getattr(F, name)
    try:
        sig = inspect.signature(fn)
        required = [p for p in sig.parameters.values()
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(required) > 1:
            return None, f"needs {len(required)} arguments ({', '.join(p.name for p in required)}); " \
                         "its module form is crawled where one exists"
    except (TypeError, ValueError):
        pass
    return Recipe(f"torch.nn.functional.{name}", "pointwise", _functional(name)), ""


def _functional_names() -> list:
    out = []
    for name in sorted(dir(F)):
        obj = getattr(F, name)
        if name.startswith("_") or inspect.isclass(obj) or inspect.ismodule(obj) or not callable(obj):
            continue
        if not (getattr(obj, "__module__", "") or "").startswith("torch"):
            continue  # typing helpers re-exported by the module
        out.append(name)
    return out


def crawl(include_torch: bool = True, include_transformers: bool = True) -> Crawl:
    """Every torch.nn class and torch.nn.functional function, and (include_transformers)
    the transformers activations and model blocks of hf_ops.FAMILIES, as recipes or skipped."""
    table = module_recipes()
    kept, fams, skipped = [], {}, []

    def consider(recipe: Recipe | None, wraps: str, reason: str) -> None:
        if recipe is None:
            skipped.append((wraps, reason))
            return
        ok, last = probe(recipe)
        if not ok:
            skipped.append((wraps, f"runs on no probe shape: {last}"))
            return
        kept.append(recipe)
        fams[recipe.wraps] = ok

    for name in _nn_classes():
        wraps = f"torch.nn.{name}"
        if name in MODULE_EXCLUDED:
            skipped.append((wraps, MODULE_EXCLUDED[name]))
        elif name in table:
            consider(table[name], wraps, "")
        else:
            rec, reason = _generic_module(name)
            consider(rec, wraps, reason)
    for name in _functional_names():
        wraps = f"torch.nn.functional.{name}"
        if name in FUNCTIONAL_EXCLUDED:
            skipped.append((wraps, FUNCTIONAL_EXCLUDED[name]))
        elif name in FUNCTIONAL_RECIPES:
            consider(FUNCTIONAL_RECIPES[name], wraps, "")
        else:
            rec, reason = _generic_functional(name)
            consider(rec, wraps, reason)
    if include_torch:
        for rec in TORCH_RECIPES:
            consider(rec, rec.wraps, "")
    if include_transformers:
        from .hf_ops import crawl_transformers
        recs, hf_skipped = crawl_transformers()
        skipped += hf_skipped
        for rec in recs:
            consider(rec, rec.wraps, "")
    return Crawl(kept, fams, skipped)

