"""A task's identity: the hash of its normalized source.

Normalization parses the module and dumps the AST without docstrings, comments, formatting or
line numbers, so the same problem written with other whitespace, comments or a different
docstring (or read from two task sets) is one task. Identifiers and constants are kept: two
problems with other shapes are two tasks (decontam.py is where renamed near-copies meet).
"""
from __future__ import annotations

import ast
import hashlib


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def parse(source: str) -> ast.Module:
    """The parsed module; raises SyntaxError (with the line) for unparsable source."""
    return ast.parse(source)


def normalized_dump(source: str) -> str:
    """ast.dump of the module without docstrings and without positions."""
    return ast.dump(_strip_docstrings(parse(source)), annotate_fields=False, include_attributes=False)


def task_identity(source: str) -> str:
    """16 hex digits of sha256 over the normalized source; raises SyntaxError when unparsable."""
    return hashlib.sha256(normalized_dump(source).encode()).hexdigest()[:16]
