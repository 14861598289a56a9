"""Decontamination: the AST similarity of each task to every evaluation task; a task above
the threshold (0.9, the paper's) is removed.

The metric (pure Python, documented in datasets/README.md):
1. Normalize the AST: docstrings dropped; every identifier (variables, arguments, function
   and class names, import aliases, `self.<attr>` names) renamed to its first-occurrence
   index; every constant replaced by its type. A copy with renamed variables or other
   shapes and constants normalizes to the same tree.
2. Features: the multiset of complete-subtree fingerprints, one per node (a node's label
   plus its children's fingerprints, hashed). Library attribute names (nn.Conv2d,
   torch.relu) and keyword names stay in the labels, so they tell operators apart.
3. Similarity: weighted Jaccard, sum(min(a_f, b_f) w_f) / sum(max(a_f, b_f) w_f), with w_f
   the smoothed inverse document frequency of f over the evaluation set,
   1 + ln((1 + M) / (1 + df_f)). 1.0 exactly when the normalized trees are equal.
   Rationale for the weights: every KernelBench-format file shares its boilerplate (imports,
   super().__init__(), get_init_inputs); unweighted, two unrelated one-operator problems score
   above 0.9 on the boilerplate alone. The weight lowers, and never zeroes, what every
   evaluation task has.
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import math
from collections import Counter

from .identity import _strip_docstrings

#: The paper's threshold: tasks more similar than this to an evaluation task are removed.
DEFAULT_THRESHOLD = 0.9


class _Canon(ast.NodeTransformer):
    """Renames identifiers to first-occurrence indices and constants to their type."""

    def __init__(self):
        self.names: dict = {}

    def _n(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node):
        node.id = self._n(node.id)
        return node

    def visit_arg(self, node):
        node.arg = self._n(node.arg)
        node.annotation = None
        return node

    def visit_FunctionDef(self, node):
        node.name = self._n(node.name)
        node.returns = None
        self.generic_visit(node)
        return node

    def visit_ClassDef(self, node):
        node.name = self._n(node.name)
        self.generic_visit(node)
        return node

    def visit_alias(self, node):
        if node.asname:
            node.asname = self._n(node.asname)
        return node

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            node.attr = "self." + self._n("self." + node.attr)
        self.generic_visit(node)
        return node

    def visit_Constant(self, node):
        return ast.Constant(value=type(node.value).__name__)


def normalize(source: str) -> ast.Module:
    """The normalized tree; raises SyntaxError for unparsable source."""
    return _Canon().visit(_strip_docstrings(ast.parse(source)))


def _label(node: ast.AST) -> str:
    parts = [type(node).__name__]
    for field, value in ast.iter_fields(node):
        if isinstance(value, (str, int, float, bool)) or value is None:
            parts.append(f"{field}={value}")
    return "|".join(parts)


def features(source: str) -> Counter:
    """The multiset of complete-subtree fingerprints of the normalized tree."""
    out: Counter = Counter()

    def walk(node: ast.AST) -> str:
        kids = [walk(c) for c in ast.iter_child_nodes(node)]
        h = hashlib.blake2b((_label(node) + "(" + ",".join(kids) + ")").encode(), digest_size=8).hexdigest()
        out[h] += 1
        return h

    walk(normalize(source))
    return out


@dataclasses.dataclass
class EvalIndex:
    """The evaluation set's features and the inverse document frequency weights."""
    names: list
    feats: list
    idf: dict
    default_w: float            # the weight of a feature no evaluation task has
    refused: list               # (name, reason) of evaluation files that did not parse

    def weight(self, f: str) -> float:
        return self.idf.get(f, self.default_w)


def build_index(tasks: list) -> EvalIndex:
    """tasks: (name, source) pairs of the evaluation set; unparsable ones are refused."""
    names, feats, refused = [], [], []
    for name, src in tasks:
        try:
            feats.append(features(src))
            names.append(name)
        except SyntaxError as e:
            refused.append((name, f"does not parse: {e.msg} (line {e.lineno})"))
    m = len(feats)
    df: Counter = Counter()
    for f in feats:
        df.update(f.keys())
    idf = {k: 1.0 + math.log((1 + m) / (1 + d)) for k, d in df.items()}
    return EvalIndex(names, feats, idf, 1.0 + math.log(1 + m), refused)


def similarity(a: Counter, b: Counter, weight) -> float:
    """Weighted Jaccard of two feature multisets (1.0: equal normalized trees)."""
    num = den = 0.0
    for k in a.keys() | b.keys():
        w = weight(k)
        x, y = a.get(k, 0), b.get(k, 0)
        num += min(x, y) * w
        den += max(x, y) * w
    return num / den if den else 1.0


def nearest(source: str, index: EvalIndex) -> tuple[float, str | None]:
    """(the highest similarity to any evaluation task, that task's name)."""
    fa = features(source)
    best, who = 0.0, None
    for name, fb in zip(index.names, index.feats):
        s = similarity(fa, fb, index.weight)
        if s > best:
            best, who = s, name
    return best, who


def histogram(values: list, bins: int = 10) -> list:
    """Counts per [i/bins, (i+1)/bins) bin over [0, 1] (1.0 in the last bin)."""
    counts = [0] * bins
    for v in values:
        counts[min(int(v * bins), bins - 1)] += 1
    return [{"lo": round(i / bins, 3), "hi": round((i + 1) / bins, 3), "count": c} for i, c in enumerate(counts)]


def summary(values: list) -> dict:
    """min, quartiles, max, mean and the histogram of a similarity list."""
    if not values:
        return {"count": 0}
    v = sorted(values)
    q = lambda p: v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]  # noqa: E731
    return {"count": len(v), "min": v[0], "p25": q(0.25), "median": q(0.5), "p75": q(0.75),
            "p95": q(0.95), "max": v[-1], "mean": sum(v) / len(v), "histogram": histogram(v)}
