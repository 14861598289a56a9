"""The pipeline's one command: crawl, construct (or read task sets), deduplicate,
decontaminate, filter by execution, write the dataset directory.

    PYTHONPATH=datasets .venv/bin/python -m caf_agent_data.pipeline --out DIR --seed 0 \
        --count 60 --eval-set skills/tasks

Progress goes to stderr; the summary (kept, dropped by reason) to stdout and report.json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import sys
import time
from collections import Counter

from . import MANIFEST_VERSION
from .decontam import DEFAULT_THRESHOLD, build_index, features, similarity, summary
from .manifest import write_manifest
from .readers import TaskSetError, read_task_set
from .stop import Stopped, on_signal as _stop  # noqa: F401 (callers import them from here)

# Rationale: names of the files a run writes; --force removes only these from --out.
OUTPUT_FILES = ("manifest.jsonl", "report.json")


def log(msg: str) -> None:
    print(f"[caf_agent_data] {msg}", file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m caf_agent_data.pipeline", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="dataset directory to write (must be empty unless --force)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, required=True, help="tasks to keep")
    p.add_argument("--max-candidates", type=int, default=0, help="stop after this many constructed (default 20 x count)")
    p.add_argument("--ops", default="1-5", help="operators per problem, a range like 1-5 or one number")
    p.add_argument("--from", dest="inputs", action="append", default=[],
                   help="filter this task set (directory, KernelBench checkout, .jsonl, .parquet) instead of synthesizing; repeatable")
    p.add_argument("--eval-set", action="append", default=[], help="evaluation task set to decontaminate against; repeatable")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="remove tasks above this similarity")
    p.add_argument("--slots", type=int, default=2, help="filter processes")
    p.add_argument("--threads", type=int, default=1, help="torch threads per slot")
    p.add_argument("--timeout-s", type=float, default=120.0, help="per-task filter deadline")
    p.add_argument("--device", default="cpu")
    p.add_argument("--compile", action="store_true", help="also run and time torch.compile (slow on a CPU)")
    p.add_argument("--min-ms", type=float, default=None, help="eager time lower bound (filter.DEFAULTS)")
    p.add_argument("--max-ms", type=float, default=None, help="eager time upper bound (filter.DEFAULTS)")
    p.add_argument("--time-budget-s", type=float, default=None, help="timing budget per task (filter.DEFAULTS budget_s)")
    p.add_argument("--scale", type=int, default=1, help="multiply the non-batch sizes (GPU sets)")
    p.add_argument("--batch-scale", type=int, default=1, help="multiply the batch sizes (GPU sets)")
    p.add_argument("--determinism-atol", type=float, default=None,
                   help="tolerance of the determinism check (filter.DEFAULTS: bitwise; a GPU may need ~1e-5)")
    p.add_argument("--max-numel", type=int, default=0, help="elements per intermediate (compose.DEFAULT_MAX_NUMEL)")
    p.add_argument("--no-transformers", action="store_true",
                   help="crawl torch only (without the transformers activations and model blocks)")
    p.add_argument("--composer", choices=("stack", "llm"), default="stack",
                   help="stack: crawled operators stacked by rule; llm: problems written by a model through --llm-url")
    p.add_argument("--llm-url", default="", help="OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1)")
    p.add_argument("--llm-model", default="", help="model name sent to the endpoint")
    p.add_argument("--llm-api-key-env", default="", help="environment variable holding the endpoint's API key")
    p.add_argument("--llm-max-tokens", type=int, default=1024)
    p.add_argument("--llm-temperature", type=float, default=0.7)
    p.add_argument("--llm-timeout-s", type=float, default=120.0)
    p.add_argument("--judge-pool", action="store_true",
                   help="then have the judge load each kept task on a GPU-pool slot (caf-agent --role local); refusals are dropped")
    p.add_argument("--pool-binary", default="", help="the caf-agent binary (default build/caf-agent)")
    p.add_argument("--pool-slots", type=int, default=0, help="GPU-pool slots of that run (default --slots)")
    p.add_argument("--force", action="store_true", help="replace the problem files of an earlier run in --out")
    a = p.parse_args(argv)
    m = re.fullmatch(r"(\d)(?:-(\d))?", a.ops)
    if not m:
        p.error(f"--ops {a.ops!r}: want a number or a range like 1-5")
    a.ops_range = (int(m.group(1)), int(m.group(2) or m.group(1)))
    if not (1 <= a.ops_range[0] <= a.ops_range[1] <= 5):
        p.error(f"--ops {a.ops!r}: operators per problem must be within 1-5")
    if a.count < 1:
        p.error("--count must be >= 1")
    if a.scale < 1 or a.batch_scale < 1:
        p.error("--scale and --batch-scale must be >= 1")
    if a.composer == "llm" and not (a.llm_url and a.llm_model):
        p.error("--composer llm needs --llm-url and --llm-model")
    return a


def prepare_out(out: str, force: bool) -> None:
    os.makedirs(out, exist_ok=True)
    ours = [f for f in os.listdir(out) if f.endswith(".py") or f in OUTPUT_FILES]
    if ours and not force:
        raise SystemExit(f"--out {out} already holds {len(ours)} dataset files; pass --force to replace them")
    for f in ours:
        os.remove(os.path.join(out, f))


def difficulty(n_ops: int, wraps: list) -> dict:
    """A heuristic: stages plus twice the anchors (GEMM, conv, norm, recurrent, attention)."""
    from .crawl import crawl  # noqa: F401  (roles come from the recipes table)
    from .ops import module_recipes
    anchors = {r.wraps for r in module_recipes().values() if r.role == "anchor"}
    score = n_ops + 2 * sum(w in anchors for w in wraps)
    bucket = "easy" if score <= 2 else "medium" if score <= 5 else "hard"
    return {"score": score, "bucket": bucket}


def candidates(args, crawl_result):
    """Yields (name, source, meta) in a seeded order."""
    if args.inputs:
        sets = []
        for path in args.inputs:
            ts = read_task_set(path)
            for where, why in ts.refused:
                yield None, None, {"stage": "read", "reason": f"{where}: {why}"}
            sets.append(ts)
        for t in (t for ts in sets for t in ts.tasks):  # duplicates are dropped (and counted) by run()
            yield re.sub(r"[^A-Za-z0-9_]", "_", t.name), t.source, {
                "origin": t.origin, "ops": t.meta.get("ops", []), "level": t.level}
        return
    from .compose import DEFAULT_MAX_NUMEL, compose
    rng = random.Random(args.seed)
    limit = args.max_candidates or 20 * args.count
    if args.composer == "llm":
        yield from _llm_candidates(args, crawl_result, rng, limit)
        return
    for _ in range(limit):
        n = rng.randint(*args.ops_range)
        p, why = compose(crawl_result, rng, n, scale=args.scale, max_numel=args.max_numel or DEFAULT_MAX_NUMEL,
                         batch_scale=args.batch_scale)
        if p is None:
            yield None, None, {"stage": "compose", "reason": why}
            continue
        yield p.name, p.source, {"origin": "synthesized", "ops": [s.wraps for s in p.steps], "level": p.level,
                                 "stage_shapes": [list(s) for s in p.shapes], "n_ops": len(p.steps)}


# Rationale: three endpoint failures in a row (refused, HTTP errors, non-completions) mean the
# endpoint is down or wrong; the retries of a working client are the endpoint's business.
MAX_ENDPOINT_FAILURES = 3


def _llm_candidates(args, crawl_result, rng, limit):
    import os as _os
    from .llm_compose import ChatEndpoint, ComposerError, compose_llm
    from .shapes import family_shape
    key = _os.environ.get(args.llm_api_key_env, "") if args.llm_api_key_env else ""
    ep = ChatEndpoint(args.llm_url, args.llm_model, key, args.llm_timeout_s, args.llm_max_tokens,
                      args.llm_temperature)
    failures = 0
    for _ in range(limit):
        n = rng.randint(*args.ops_range)
        shape = family_shape(rng.choice(["2d", "3d", "4d"]), rng, args.scale, args.batch_scale)
        try:
            c, why = compose_llm(ep, crawl_result, rng, n, shape)
        except ComposerError as e:
            failures += 1
            yield None, None, {"stage": "endpoint", "reason": str(e)}
            if failures >= MAX_ENDPOINT_FAILURES:
                args.abort_reason = f"the composer's endpoint failed {failures} times in a row: {e}"
                return
            continue
        failures = 0
        if c is None:
            yield None, None, {"stage": "compose_llm", "reason": why}
            continue
        yield c["name"], c["source"], {"origin": f"llm:{args.llm_model}", "ops": c["ops"], "level": c["level"],
                                       "n_ops": len(c["ops"]), "meta_check": True}


def run(args) -> dict:
    t_start = time.time()
    prepare_out(args.out, args.force)
    report = {"version": MANIFEST_VERSION, "seed": args.seed, "count": args.count,
              "command": "python -m caf_agent_data.pipeline " + " ".join(shlex.quote(a) for a in args.argv)}
    import torch
    report["torch"] = torch.__version__
    crawl_result = None
    if not args.inputs:
        from .crawl import crawl
        crawl_result = crawl(include_transformers=not args.no_transformers)
        log(f"crawl: {len(crawl_result.recipes)} operators kept, {len(crawl_result.skipped)} skipped")
        report["crawl"] = {"kept": [r.wraps for r in crawl_result.recipes],
                           "skipped": [{"wraps": w, "reason": r} for w, r in crawl_result.skipped]}
    eval_tasks, eval_refused = [], []
    for path in args.eval_set:
        ts = read_task_set(path)
        eval_tasks += [(t.origin, t.source) for t in ts.tasks]
        eval_refused += [{"where": w, "reason": r} for w, r in ts.refused]
    index = build_index(eval_tasks) if eval_tasks else None
    eval_ids = {__import__("caf_agent_data.identity", fromlist=["x"]).task_identity(s) for _, s in eval_tasks}
    report["eval_set"] = {"paths": args.eval_set, "tasks": len(eval_tasks), "refused": eval_refused}
    log(f"evaluation set: {len(eval_tasks)} tasks ({len(eval_refused)} refused) from {args.eval_set or 'none'}")

    from .filter import DEFAULTS as FILTER_DEFAULTS
    from .slots import SlotPool
    opts = {"device": args.device, "compile": args.compile, "seed": args.seed}
    if args.min_ms is not None:
        opts["min_ms"] = args.min_ms
    if args.max_ms is not None:
        opts["max_ms"] = args.max_ms
    if args.time_budget_s is not None:
        opts["budget_s"] = args.time_budget_s
    if args.determinism_atol is not None:
        opts["determinism_atol"] = args.determinism_atol
    report["filter_options"] = dict(FILTER_DEFAULTS, **opts)
    dropped, examples, sims, removed = Counter(), {}, [], []
    seen, kept = set(eval_ids), []

    def drop(stage, reason, name=None):
        dropped[stage] += 1
        examples.setdefault(stage, [])
        if len(examples[stage]) < 5:
            examples[stage].append((f"{name}: " if name else "") + reason)

    gen = candidates(args, crawl_result)
    from .identity import task_identity
    prepared = []            # (name, source, meta) in job order
    counts = {"seen": 0, "prepare_s": 0.0}

    def jobs():
        """Candidates that pass dedup and decontamination, as filter jobs; pulled by the slot
        pool only when a slot is free, so constructing the next candidate overlaps the
        running ones."""
        for name, source, meta in gen:
            t0 = time.time()
            counts["seen"] += 1
            job = _prepare(name, source, meta)
            counts["prepare_s"] += time.time() - t0
            if job is not None:
                prepared.append(job)
                yield job[0], job[1], dict(opts, meta_check=job[2].get("meta_check", False))

    def _prepare(name, source, meta):
        if source is None:
            drop(meta["stage"], meta["reason"])
            return None
        try:
            ident = task_identity(source)
        except SyntaxError as e:
            drop("read", f"does not parse: {e.msg}", name)
            return None
        if ident in seen:
            drop("duplicate", f"identity {ident} already taken (or in the evaluation set)", name)
            return None
        seen.add(ident)
        sim, nearest_name = 0.0, None
        if index is not None:
            fa = features(source)
            for en, fb in zip(index.names, index.feats):
                s = similarity(fa, fb, index.weight)
                if s > sim:
                    sim, nearest_name = s, en
            sims.append(sim)
            if sim > args.threshold:
                removed.append({"name": name, "similarity": round(sim, 4), "nearest": nearest_name})
                drop("decontaminated", f"similarity {sim:.3f} > {args.threshold} to {nearest_name}", name)
                return None
        meta.update(identity=ident, similarity={"max": round(sim, 4), "nearest": nearest_name})
        return name, source, meta

    # Rationale: results are taken in job order (not completion order), so the kept set does
    # not depend on which slot was faster; a progress line every so many results.
    every = max(10, 2 * args.slots)
    results, nxt, jobs_run = {}, 0, 0
    t0 = time.time()
    with SlotPool(args.slots, args.timeout_s, args.threads) as pool:
        try:
            for idx, r in pool.map(jobs()):
                results[idx] = r
                jobs_run += 1
                while nxt in results and len(kept) < args.count:
                    name, source, meta = prepared[nxt]
                    r = results.pop(nxt)
                    if not r["kept"]:
                        drop(r["stage"], r["reason"], name)
                    else:
                        kept.append((name, source, meta, r))
                    nxt += 1
                if jobs_run % every == 0:
                    log(f"filter: {len(kept)}/{args.count} kept, {counts['seen']} candidates seen, {jobs_run} run, "
                        f"dropped {dict(dropped)}")
                if len(kept) >= args.count:
                    break
        except Stopped as e:  # SIGTERM/SIGINT: write what was kept so far
            args.abort_reason = str(e)
    t_filter = time.time() - t0
    n_seen = counts["seen"]
    log(f"filter: {len(kept)}/{args.count} kept, {n_seen} candidates seen, {jobs_run} run, dropped {dict(dropped)}")

    if args.judge_pool and kept:
        from .pool_filter import DEFAULT_BINARY, judge_through_pool
        log(f"judge: {len(kept)} tasks through the GPU pool ({args.pool_slots or args.slots} slots)")
        pool_res = judge_through_pool([(k[0], k[1]) for k in kept], args.pool_binary or DEFAULT_BINARY,
                                      args.pool_slots or args.slots, args.device)
        judged = []
        for item in kept:
            v = pool_res["verdicts"][item[0]]
            if v["accepted"]:
                judged.append(item)
            else:
                drop(v["stage"], v["reason"], item[0])
        report["judge_pool"] = {"tasks": len(kept), "accepted": len(judged), "wall_s": pool_res["wall_s"],
                                "slots": args.pool_slots or args.slots}
        log(f"judge: {len(judged)} of {len(kept)} accepted in {pool_res['wall_s']} s")
        kept = judged

    records = []
    for name, source, meta, r in kept:
        fn = f"{name}.py"
        with open(os.path.join(args.out, fn), "w", encoding="utf-8") as f:
            f.write(source)
        times = {"eager_ms": r.get("eager_ms")}
        if "compile_ms" in r:
            times["compile_ms"] = r["compile_ms"]
        records.append({
            "name": name, "file": fn, "identity": meta["identity"], "level": meta.get("level"),
            "origin": meta.get("origin"), "ops": meta.get("ops", []),
            "stage_shapes": meta.get("stage_shapes"), "input_shapes": r.get("input_shapes"),
            "input_dtypes": r.get("input_dtypes"), "output_shapes": r.get("output_shapes"),
            "params": r.get("params"), "times": {r.get("device", args.device): times},
            "similarity": meta["similarity"],
            "difficulty": difficulty(len(meta.get("ops", [])) or 1, meta.get("ops", [])),
        })
    write_manifest(os.path.join(args.out, "manifest.jsonl"),
                   {"seed": args.seed, "command": report["command"], "torch": report["torch"],
                    "eval_set": args.eval_set, "threshold": args.threshold, "filter": report["filter_options"]},
                   records)
    report.update(kept=len(records), candidates_seen=n_seen, dropped=dict(dropped), dropped_examples=examples,
                  similarity=summary(sims), decontaminated=removed, wall_s=round(time.time() - t_start, 1),
                  filter_s=round(t_filter, 1), filter_jobs=jobs_run, slots=args.slots,
                  prepare_s=round(counts["prepare_s"], 1),
                  jobs_per_s_per_slot=round(jobs_run / t_filter / args.slots, 3) if t_filter else None)
    if getattr(args, "abort_reason", ""):
        report["aborted"] = args.abort_reason
    with open(os.path.join(args.out, "report.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    return report


def print_summary(report: dict) -> None:
    print(f"kept {report['kept']} of {report['candidates_seen']} candidates "
          f"({report['filter_jobs']} executed in {report['filter_s']} s on {report['slots']} slots; "
          f"wall {report['wall_s']} s)")
    for stage, n in sorted(report["dropped"].items(), key=lambda kv: -kv[1]):
        print(f"  dropped {n:5d}  {stage}: e.g. {report['dropped_examples'][stage][0][:160]}")
    s = report["similarity"]
    if s.get("count"):
        print(f"  similarity to the evaluation set: median {s['median']:.3f}, p95 {s['p95']:.3f}, max {s['max']:.3f}")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    args.argv = argv
    import signal
    from .pool_filter import PoolError
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        report = run(args)
    except (TaskSetError, PoolError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print_summary(report)
    if report.get("aborted"):
        print(f"error: stopped early: {report['aborted']}", file=sys.stderr)
        return 2
    return 0 if report["kept"] >= args.count else 1


if __name__ == "__main__":
    sys.exit(main())
