"""What the kernel benches (bench_fp8_attention.py, bench_gemv.py, bench_boundaries.py) share: their
command line (--tool, --build-dir, --calls, --only, --out), the tool they run (built when --tool is
not given) and its JSON line, the card's HBM bandwidth their read rates are set beside, and their
--out and exit status."""
import argparse
import json
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_generate  # noqa: E402  (build_tool)

# Rationale: the data sheets' HBM bandwidths (H100 SXM 3.35 TB/s, H200 SXM 4.8 TB/s); a kernel near
# one card's bound is far from the other's, so the table sets each run beside its own card's.
HBM_BYTES_PER_S = {"H100": 3.35e12, "H200": 4.8e12}


def card_bound(name):
    """The HBM bandwidth of the card named `name` (torch.cuda.get_device_name), else the H200's."""
    for card, bound in HBM_BYTES_PER_S.items():
        if card in name:
            return card, bound
    return "H200 (not this card's)", HBM_BYTES_PER_S["H200"]


def parse_args(doc, only_help, extra=None):
    """The benches' arguments; `doc` the module's docstring (its first line describes it); `extra`
    adds a bench's own to the parser."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--tool", type=pathlib.Path, help="a built policy_model_tool (default: build one)")
    parser.add_argument("--build-dir", type=pathlib.Path, default=pathlib.Path("/tmp/policy-build"))
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--only", nargs="*", help=only_help)
    parser.add_argument("--out", type=pathlib.Path)
    if extra:
        extra(parser)
    return parser.parse_args()


def tool_of(args):
    """--tool when it is a file (else exits naming it), or one built into --build-dir."""
    if args.tool is None:
        return bench_generate.build_tool(args.build_dir)
    if not args.tool.is_file():
        sys.exit(f"--tool {args.tool}: no such file (build policy_model_tool first)")
    return args.tool


def this_card():
    """(the GPU's name, the card its bound is of, that bound in bytes/s)."""
    import torch  # here, not at import: the tool check comes first and torch is slow to load
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (name, *card_bound(name))


def tool_lines(args, base):
    """Runs the tool with `args` (a list; each item str()-ed): `base` with each JSON line's fields, in
    order, or a list of one: `base` with `error`, the first line of its stderr (the message, not a
    C++ trace after it), or what is wrong with its stdout. A line that is not JSON is that line's
    error, not the bench's end."""
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return [dict(base, error=lines[0][:300])]
    lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
    if not lines:
        return [dict(base, error="no JSON line on stdout")]
    out = []
    for line in lines:
        try:
            out.append(dict(base, **json.loads(line)))
        except json.JSONDecodeError as e:
            out.append(dict(base, error=f"not JSON ({e}): {line[:200]}"))
    return out


def tool_line(args, base):
    """tool_lines' last line: the one answer of a tool that prints one JSON line."""
    return tool_lines(args, base)[-1]


def finish(out, results):
    """`results` as JSON into `out` (when given); the bench's exit status: 1 when any has an error."""
    if out:
        out.write_text(json.dumps(results, indent=1))
    return 1 if any("error" in r for r in results) else 0
