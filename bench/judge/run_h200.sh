#!/usr/bin/env bash
# The judge's GPU runs on the H200 device machine, in one call (results under $OUT):
#   bash bench/judge/run_h200.sh [suite|bench|all]
# suite: the CUDA reward-hack suite; bench: warm wall/compile/CV on add_relu (small L1 task and
# a >= 100 us task) and tier stability on a >= 1 ms compute-bound task.
set -u
OUT=${OUT:-/tmp/judge-h200}; mkdir -p "$OUT"
PY=${PY:-python3}
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
export CAF_EVAL_BUILD_ROOT=${CAF_EVAL_BUILD_ROOT:-/tmp/caf_eval_build}
what=${1:-all}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv
  $PY -c 'import sys,torch,pytest,msgpack,numpy; print(sys.version); print(torch.__version__, torch.version.cuda)'
  nvcc --version | tail -1; } 2>&1 | tee "$OUT/env.txt"
if [ "$what" = suite ] || [ "$what" = all ]; then
  timeout ${ST:-240} $PY -m pytest -v -n 3 --tb=short -p no:cacheprovider -m gpu tests/reward_hacks/cuda --junitxml="$OUT/suite.xml" 2>&1 \
    | tee "$OUT/suite.log" | grep -E "passed|failed|PASSED|FAILED|ERROR|Error" | tail -40
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  # Sequential after the suite (numbers taken beside the suite are contended); the shared
  # build root lets later runs reuse the kernels the suite built.
  b() { local name=$1; shift; timeout "${BT:-200}" $PY bench/judge/bench_judge.py --device cuda \
          --build-root "$CAF_EVAL_BUILD_ROOT" --out "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
        echo "$name rc=$?"; }
  BT=120 b small --rows 16 --cols 16384
  BT=150 b large --rows 8192 --cols 8192 --no-compile-bench
  BT=120 b sin1ms --task sin_chain --rows 4096 --cols 8192 --iters 64 --no-compile-bench
  $PY - "$OUT" <<'PY'
import json, os, sys
for n in ("small", "large", "sin1ms"):
    p = os.path.join(sys.argv[1], n + ".json")
    if not os.path.exists(p):
        print(n, "missing"); continue
    d = json.load(open(p)); w = d["warm_verify_profile_s"]; c = d["candidate_ms"]
    print(n, d["task"], "compile_s=%s" % d.get("compile", {}).get("seconds"),
          "cold=%.1f" % d["cold_profile_s"], "warm_med=%.2f min=%.2f max=%.2f" % (w["median"], w["min"], w["max"]),
          "cand_med=%.4f cv=%.4f" % (c["median"], c["cv"]), "tiers", d["tiers_seen"],
          "eager", d["eager_ms"][-1], "compile", d["compile_ms"][-1], "iters", d["iterations"])
PY
fi
