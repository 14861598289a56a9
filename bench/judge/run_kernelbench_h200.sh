#!/usr/bin/env bash
# KernelBench scored in full on the H200 (issue 28's benchmark), results under $OUT:
#   bash bench/judge/run_kernelbench_h200.sh STEP...      (steps run in the order given)
# verify:    a reference copy of every one of the 250 problems (bench_kernelbench.py, KB_WORKERS
#            workers) with the honest relu kernel's job in mode RELU_MODE (default final: verify
#            and timing against eager and compile on the 6 GiB task): a verdict for each, none
#            refused as task_error or for size -> kernelbench.json
# constant:  the constant-answer attack on each of the 47 problems degenerate as KernelBench
#            initialises them (DEGENERATE below): reward -1 expected on all -> constant.json
# margin:    the same 47 in-process: the parameter scale or degenerate verdict the judge keeps,
#            and an accurate (float64) answer under the judge's tests -> margin.json
# baselines: eager and torch.compile baselines of all 250 (datasets/run_baselines_h200.sh;
#            CACHE_IN: an earlier call's cache.tgz) -> kb_baselines.json/.md, cache.tgz
# report:    the report command over the bundled tasks and their recorded CUDA kernels
#            (skills/replay/cuda_demonstrations.jsonl) -> report.md/.json
# KernelBench's KernelBench/ folder must be under bench/judge/external/ (git ignores it; carry it).
# PACK=1: everything under $OUT packed into $OUT/kb-h200.tgz at the end (the device returns 8 files).
set -u
OUT=${OUT:-/tmp/kb-h200}; mkdir -p "$OUT"
PY=${PY:-python3}
KB=bench/judge/external/KernelBench
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
export CAF_EVAL_BUILD_ROOT=${CAF_EVAL_BUILD_ROOT:-/tmp/caf_eval_build}
# The 47 problems whose output does not depend on the input at KernelBench's initialisation
# and tolerance (bench/results/2026-12-02-h200.md, call 1).
DEGENERATE=1:4,1:6,1:49,1:94,1:95,1:99,1:100,2:8,2:9,2:10,2:36,2:38,2:42,2:44,2:45,2:49,2:56,2:58,2:64,2:65,2:67,2:77,2:80,2:83,2:89,2:91,2:96,3:3,3:5,3:7,3:9,3:10,3:11,3:12,3:15,3:16,3:18,3:19,3:20,3:22,3:23,3:24,3:26,3:27,3:28,3:35,3:45
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  $PY -c 'import sys,torch; print(sys.version); print(torch.__version__, torch.version.cuda)'
  nvcc --version | tail -1; nproc; git log -1 --format=%H 2>/dev/null; } > "$OUT/env.txt" 2>&1
for s in "$@"; do
  t0=$(date +%s)
  case $s in
  verify)
    timeout "${KT:-230}" $PY bench/judge/bench_kernelbench.py --root $KB --device cuda:0 \
      --build-root "$CAF_EVAL_BUILD_ROOT" --job-timeout "${KB_JOB_S:-90}" --budget-s "$(( ${KT:-230} - 30 ))" \
      --workers "${KB_WORKERS:-12}" --honest-relu --relu-mode "${RELU_MODE:-final}" \
      --prior bench/results/2026-12-02-judge-h200/kernelbench.json \
      --estimates $KB/caf_estimates.json --out "$OUT/kernelbench.json" > "$OUT/kernelbench.log" 2>&1
    echo "verify rc=$?"; grep -E "honest|SUMMARY" "$OUT/kernelbench.log" | cut -c1-1500 ;;
  constant)
    timeout "${CT:-150}" $PY bench/judge/bench_kernelbench.py --root $KB --device cuda:0 --constant \
      --select "$DEGENERATE" --build-root "$CAF_EVAL_BUILD_ROOT" --job-timeout 60 --budget-s "$(( ${CT:-150} - 20 ))" \
      --workers "${KB_WORKERS:-12}" --estimates $KB/caf_estimates.json --out "$OUT/constant.json" > "$OUT/constant.log" 2>&1
    echo "constant rc=$?"; grep SUMMARY "$OUT/constant.log" ;;
  margin)
    timeout "${MT:-150}" $PY bench/judge/degenerate_margin.py --root $KB --device cuda:0 \
      --problems bench/results/2026-12-02-judge-h200/kernelbench.json --out "$OUT/margin.json" > "$OUT/margin.log" 2>&1
    echo "margin rc=$?"; grep SUMMARY "$OUT/margin.log" ;;
  baselines)
    OUT="$OUT" bash datasets/run_baselines_h200.sh $KB $KB/caf_estimates_baseline.json ;;
  report)
    R=/tmp/kb_report
    PYTHONPATH=datasets timeout "${RT:-200}" $PY -m caf_agent_data.kernelbench_eval --tasks skills/tasks \
      --replay skills/replay/cuda_demonstrations.jsonl --device cuda:0 --workers 2 --out $R > "$OUT/report.log" 2>&1
    echo "report rc=$?"; cp $R/report.md $R/report.json $R/results.jsonl "$OUT/" 2>/dev/null
    cat "$OUT/report.md" 2>/dev/null | head -30 ;;
  esac
  echo "step $s: $(( $(date +%s) - t0 )) s"
done
if [ "${PACK:-0}" = 1 ]; then (cd "$OUT" && tar czf /tmp/kb-h200.tgz --exclude kb-h200.tgz . && rm -rf ./* && mv /tmp/kb-h200.tgz .); fi
