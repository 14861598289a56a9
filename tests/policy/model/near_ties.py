"""Comparing two engine runs' greedy conversations where both are correct to their dtype's rounding:
a fused kernel against the ATen composite it replaces (test_fused_kernels_gpu.py,
test_fp8_kv_gpu.py), or two attention modes (test_near_ties.py, on the CPU).

Two correct half-precision paths round in different places. Their greedy replies agree token for
token until a near tie, where they may part; an episode that parted is not compared after (its
later prompts differ). Where they agree, their logprobs differ because their logits were rounded
differently. A logprob is the chosen token's logit less the log of the softmax's sum (greedy runs
report it at temperature 1), each rounded to about its own spacing in the model's dtype, so the unit
of that difference is the spacing of the larger of the two: 2^-7 of its power of two in bf16
(0.016-0.031 for the test model's logits of 2 to 8). A bound in absolute terms (0.05, as flash
against sdpa) is 1.6 spacings between 4 and 8, inside the noise of two correct paths (below: 0.045
apart), so any change of rounding failed it.

The rule, in spacings of the largest of the two runs' logits of the token and their log-sums
(logit - logprob):
- each compared token's logprobs within MAX_SPACINGS;
- their mean difference within MEAN_SPACINGS;
- where a reply parts, the two picks' logprobs within MAX_SPACINGS (a near tie).
Why these numbers (the conversation below, `sharp_qwen2`, on the CPU; test_near_ties.py keeps
them true): sdpa against matmul attention differed by at most 1.45 spacings (mean 0.30) over a bf16
cache and 1.09 (mean 0.34) over an e4m3 cache, where the e4m3 cache against the bf16 one, a change
of numerics and not of rounding, differed by up to 10.4 (mean 3.2).
"""
import json
import math
from dataclasses import dataclass, field

from test_policy_model import run_tool

MAX_SPACINGS = 4.0
MEAN_SPACINGS = 1.0

# Stored mantissa bits of the logits' dtype.
MANTISSA_BITS = {"bfloat16": 7, "float16": 10, "float32": 23}


def conversation(path, fused=True, dtype="bfloat16", mode="flash", temperature=0, extra=(), device="cuda"):
    """5 episodes x 4 turns through agent-bench, 2 at a time (evicting kept prefixes): each reply by
    (episode, turn), with its tokens' logprobs and logits, and the summary. `extra`: more tool flags."""
    proc = run_tool("agent-bench", "--model", path, "--device", device, "--dtype", dtype, "--cache-attention",
                    mode, "--vocab", 512, "--episodes", 5, "--turns", 4, "--system", 200, "--obs", 60, "--reply",
                    40, "--temperature", temperature, "--print", "--report-logits", "--max-batch", 2,
                    "--max-context", 2048, "--prefill-chunk", 128, *([] if fused else ["--no-fused-kernels"]),
                    *extra)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    replies = {(r["episode"], r["turn"]): r for r in lines if "episode" in r}
    summary = next(r for r in lines if "generated" in r)
    return replies, summary


def spacing(z, dtype="bfloat16"):
    """The distance from |z| to the next number of `dtype` above it (a normal number's ulp)."""
    z = abs(z)
    bits = MANTISSA_BITS[dtype]
    return 2.0 ** (math.floor(math.log2(z)) - bits) if z > 0 else 2.0 ** (-126 - bits)


@dataclass
class comparison:
    generated: int = 0  # tokens the second run generated in all
    largest: float = 0.0  # the largest logprob difference of a compared token
    # Each compared token's difference in spacings (the tokens where both replies agree, in episodes
    # not yet parted).
    spacings: list = field(default_factory=list)
    partings: list = field(default_factory=list)  # (episode, turn, token index, difference in spacings)

    @property
    def compared(self):
        return len(self.spacings)

    @property
    def largest_spacings(self):
        return max(self.spacings, default=0.0)

    @property
    def mean_spacings(self):
        return sum(self.spacings) / len(self.spacings) if self.spacings else 0.0

    def line(self):
        return (f"{self.compared} of {self.generated} tokens compared; logprob differences: largest "
                f"{self.largest:.4f} ({self.largest_spacings:.2f} spacings), mean {self.mean_spacings:.3f} "
                f"spacings; {len(self.partings)} partings, "
                f"{max((p[3] for p in self.partings), default=0):.2f} spacings at most")


def unit(a, b, i, dtype):
    """The spacing that measures replies a and b at token i: of the largest of their logits and
    log-sums there."""
    return spacing(max(max(abs(r["logits"][i]), abs(r["logits"][i] - r["logprobs"][i])) for r in (a, b)), dtype)


def compare(on, off, dtype="bfloat16"):
    """The comparison of two greedy (or temperature 1) runs' replies by (episode, turn), each with
    its logits (the tool's --report-logits)."""
    out = comparison(generated=sum(len(r["tokens"]) for r in off.values()))
    parted = set()
    for key in sorted(off):
        if key[0] in parted:
            continue
        a, b = on[key], off[key]
        if "logits" not in a or "logits" not in b:
            raise ValueError(f"reply {key} has no logits: run the tool with --report-logits")
        same = 0
        while same < min(len(a["tokens"]), len(b["tokens"])) and a["tokens"][same] == b["tokens"][same]:
            same += 1
        for i in range(same):
            d = abs(a["logprobs"][i] - b["logprobs"][i])
            out.spacings.append(d / unit(a, b, i, dtype))
            out.largest = max(out.largest, d)
        if same < len(b["tokens"]):
            parted.add(key[0])
            if same < len(a["tokens"]):
                d = abs(a["logprobs"][same] - b["logprobs"][same])
                units = d / unit(a, b, same, dtype)
            else:  # a ended where b went on: no pick to weigh
                units = math.inf
            out.partings.append((key[0], key[1], same, units))
    return out


def first_difference(a, b):
    """Where two runs' replies (by (episode, turn)) first differ, in words, or None where they are
    equal: which replies differ, then in the first of them the first token index where a field
    differs (a bit-for-bit test's message: whether a token or only a logprob moved, by how much,
    and where: a fault that starts at one point of the run, a graph captured there, parts every
    reply after it)."""
    if a == b:
        return None
    keys = sorted(set(a) | set(b))
    differing = [k for k in keys if a.get(k) != b.get(k)]
    head = f"{len(differing)} of {len(keys)} replies differ ({', '.join(map(str, differing[:8]))}"
    head += ", ..): " if len(differing) > 8 else "): "
    key = differing[0]
    if key not in a or key not in b:
        return head + f"reply {key} is in only one run"
    ra, rb = a[key], b[key]
    fields = ("tokens", "logprobs", "logits")
    longest = max((len(r.get(f, [])) for r in (ra, rb) for f in fields), default=0)
    for i in range(longest):
        for field in fields:
            xa, xb = ra.get(field, []), rb.get(field, [])
            if i >= len(xa) or i >= len(xb):
                if len(xa) != len(xb):
                    return head + f"reply {key}: {field} of {len(xa)} against {len(xb)}"
                continue
            if xa[i] != xb[i]:
                return head + (f"reply {key}: {field}[{i}] {xa[i]!r} against {xb[i]!r} (tokens equal before it: "
                               f"{ra.get('tokens', [])[:i] == rb.get('tokens', [])[:i]})")
    others = sorted(f for f in set(ra) | set(rb) if ra.get(f) != rb.get(f))
    return head + f"reply {key}: {', '.join(others)} differ"


def agree_to_near_ties(on, off, dtype="bfloat16"):
    """Asserts the rule above for two runs' replies; returns (tokens compared, tokens generated). Prints
    the comparison (pytest -rP shows it for a passing test), so that two kernels' distances from the
    same composite can be set side by side."""
    c = compare(on, off, dtype)
    print(f"agree_to_near_ties: {c.line()}")
    assert c.largest_spacings <= MAX_SPACINGS, c.line()
    assert c.mean_spacings <= MEAN_SPACINGS, c.line()
    for episode, turn, token, units in c.partings:
        assert units <= MAX_SPACINGS, (f"episode {episode} turn {turn} parted at token {token} where the picks' "
                                       f"logprobs are {units:.2f} spacings apart: not a near tie", c.line())
    return c.compared, c.generated
