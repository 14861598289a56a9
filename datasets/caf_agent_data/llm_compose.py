"""The LLM composer: fused problems written by a language model through any OpenAI-compatible
chat endpoint (vLLM, SGLang, a `caf-agent --role inference` node), as the paper composed
CUDA-Agent-Ops-6K. The model's text is untrusted input: what it writes becomes a candidate
only after a static screen here; the filter then checks it on meta tensors (its first stage
for these candidates, in a slot process with a deadline) before any real run, and applies
the same criteria as to every other candidate.

A reply is rejected, with the reason, when it has no Python code block (or code), does not
parse, lacks Model / get_inputs / get_init_inputs, imports anything but torch, math and
transformers, uses a name or attribute that reaches outside the model (open, exec, eval,
__import__, getattr, os, sys, subprocess, dunder attributes), or loads weights (from_pretrained).
"""
from __future__ import annotations

import ast
import dataclasses
import json
import random
import re
import urllib.error
import urllib.request

from .compose import ROLE_WEIGHT, FIRST_ROLE_WEIGHT, short
from .identity import task_identity
from .readers import check_source

#: Top-level packages a composed problem may import.
ALLOWED_IMPORTS = ("torch", "math", "transformers")
#: Names a composed problem may not use (they reach the file system, processes or the
#: interpreter rather than compute).
FORBIDDEN_NAMES = ("open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "input",
                   "breakpoint", "os", "sys", "subprocess", "socket", "shutil", "pathlib", "importlib",
                   "getattr", "setattr", "delattr")
#: Attribute names a composed problem may not use.
FORBIDDEN_ATTRS = ("from_pretrained", "load", "save", "system", "popen", "hub")

_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)

SYSTEM = ("You write PyTorch benchmark problems in the KernelBench format: one Python file that "
          "imports torch, defines class Model(nn.Module) with __init__ and forward, module-level "
          "size constants, get_inputs() returning a list of input tensors and get_init_inputs() "
          "returning the constructor's arguments. Reply with exactly one ```python code block.")


class ComposerError(Exception):
    """The endpoint cannot be used (unreachable, an HTTP error, a reply that is not an OpenAI
    chat completion): not the model's fault, and the same for every further request."""


@dataclasses.dataclass
class ChatEndpoint:
    """An OpenAI-compatible endpoint: base_url ends in /v1 (or wherever /chat/completions
    lives)."""
    base_url: str
    model: str
    api_key: str = ""
    timeout_s: float = 120.0
    max_tokens: int = 1024
    temperature: float = 0.7

    def complete(self, messages: list, seed: int) -> str:
        """The reply's text (content, else the raw text our server adds); raises ComposerError."""
        body = json.dumps({"model": self.model, "messages": messages, "max_tokens": self.max_tokens,
                           "temperature": self.temperature, "seed": seed}).encode()
        url = self.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read()[:300].decode("utf-8", "replace")
            raise ComposerError(f"POST {url}: HTTP {e.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as e:
            raise ComposerError(f"POST {url}: {getattr(e, 'reason', e)}") from None
        try:
            answer = json.loads(raw)
            msg = answer["choices"][0]["message"]
            text = msg.get("content") or answer["choices"][0].get("raw_text") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise ComposerError(f"POST {url}: not an OpenAI chat completion: {raw[:200]!r}") from None
        if not isinstance(text, str):
            raise ComposerError(f"POST {url}: the message content is a {type(text).__name__}, not text")
        return text


def prompt(wraps: list, shape: tuple) -> list:
    """The chat messages asking for one problem that applies the operators in order."""
    ops = "\n".join(f"{i + 1}. {w}" for i, w in enumerate(wraps))
    user = (f"Write a problem whose Model applies these operators in this order, each to the previous "
            f"one's output:\n{ops}\nThe input is one float32 tensor of shape {list(shape)} (batch first). "
            f"Choose constructor arguments so that the shapes agree; no randomness in forward.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def extract_code(text: str) -> tuple[str | None, str]:
    """(source, "") from the reply's first fenced code block, or the whole reply when it is
    itself a module defining Model; else (None, why)."""
    m = _FENCE.search(text)
    if m:
        return m.group(1), ""
    if "class Model" in text:
        return text, ""
    return None, f"no Python code block in the reply ({len(text)} characters: {text[:80]!r})"


def screen(source: str) -> tuple[str | None, str]:
    """(identity, "") when the source passes the static screen, else (None, the reason)."""
    ident, why = check_source(source)
    if why:
        return None, why
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [node.module or ""] if node.level == 0 else ["." * node.level + (node.module or "")]
        else:
            mods = []
        for mod in mods:
            if mod.split(".")[0] not in ALLOWED_IMPORTS:
                return None, f"imports {mod} (a composed problem may import only {', '.join(ALLOWED_IMPORTS)})"
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            return None, f"uses `{node.id}` (line {node.lineno}): a problem computes, it does not reach outside"
        if isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_ATTRS:
                return None, f"uses `.{node.attr}` (line {node.lineno}): weights and files stay out of a problem"
            if node.attr.startswith("__") and node.attr != "__init__":
                return None, f"uses the dunder attribute `.{node.attr}` (line {node.lineno})"
    return ident, ""


def draw_ops(crawl, rng: random.Random, n_ops: int) -> list:
    """n_ops crawled operators (role-weighted like the stacking composer) as a hint."""
    out = []
    for i in range(n_ops):
        weights = FIRST_ROLE_WEIGHT if i == 0 else ROLE_WEIGHT
        rec = rng.choices(crawl.recipes, weights=[weights[r.role] for r in crawl.recipes])[0]
        out.append(rec.wraps)
    return out


def compose_llm(endpoint: ChatEndpoint, crawl, rng: random.Random, n_ops: int, shape: tuple) \
        -> tuple[dict | None, str]:
    """One candidate from the model: ({"name", "source", "identity", "ops", "reply_chars"},
    "") or (None, why the reply was rejected). Raises ComposerError when the endpoint fails."""
    wraps = draw_ops(crawl, rng, n_ops)
    text = endpoint.complete(prompt(wraps, shape), seed=rng.randrange(1 << 31))
    source, why = extract_code(text)
    if source is None:
        return None, why
    ident, why = screen(source)
    if ident is None:
        return None, why
    name = "llm_" + "_".join(short(w).lower() for w in wraps)[:52] + "_" + task_identity(source)[:8]
    level = 1 if n_ops == 1 else 2
    if not re.match(r"""^\s*(\"\"\"|''')\s*Level\s+\d""", source):
        source = f'"""Level {level}: composed by {endpoint.model} from {", ".join(wraps)}."""\n' + source
    return {"name": name, "source": source, "identity": task_identity(source), "ops": wraps,
            "level": level, "reply_chars": len(text)}, ""
