#!/usr/bin/env bash
# KernelBench's eager and torch.compile baselines measured by the judge, in one device call
# (results under $OUT):
#   bash datasets/run_baselines_h200.sh KERNELBENCH_CHECKOUT [ESTIMATES_JSON]
# caf_agent_data.judge_baselines: every problem of levels 1-3 is a baseline job (the eval
# worker's mode "baseline") on SLOTS eval workers sharing the GPU; an eager pass over all,
# then eager + torch.compile. No job starts after BUDGET seconds; CAP seconds stop the run
# (SIGTERM: the report is written with what was measured, every problem one row).
# ESTIMATES_JSON: the judge's size estimates by task (device independent, meta tensors),
# computed where they are missing. LEVELS (default 1,2,3) splits the run over two calls when
# one cannot hold every compile (e.g. LEVELS=1,2 then LEVELS=3: level 3's networks compile
# slowest); CACHE_IN, a cache.tgz of an earlier call on the same GPU and torch, is unpacked
# first, so its baselines are read, not measured again.
set -u
KB=${1:?usage: datasets/run_baselines_h200.sh KERNELBENCH_CHECKOUT [ESTIMATES_JSON]}
EST=${2:-}
OUT=${OUT:-/tmp/baselines-h200}; mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH="$PWD/datasets${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
# Rationale: slots compile side by side on 16 cores; inductor's default of one compile
# thread per core each would oversubscribe them.
export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-1}
# Baseline jobs run no submission: no fork server, the spare child is spawned.
export CAF_EVAL_ZYGOTE=0
export CAF_EVAL_BUILD_ROOT=${CAF_EVAL_BUILD_ROOT:-/tmp/caf_eval_build}
[ -x /opt/gcc/bin/gcc ] && export CC=${CC:-/opt/gcc/bin/gcc} CXX=${CXX:-/opt/gcc/bin/g++}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used,memory.total --format=csv 2>&1
  $PY -c 'import sys, torch; print(sys.version); print("torch", torch.__version__, torch.version.cuda)'
  nproc; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,utilization.gpu,memory.used \
  --format=csv -lms 500 > "$OUT/smi.csv" 2>&1 &
SMI=$!
[ -n "${CACHE_IN:-}" ] && tar -C "$OUT" -xzf "$CACHE_IN"
t0=$(date +%s)
timeout -s TERM "${CAP:-280}" $PY -m caf_agent_data.judge_baselines --tasks "$KB" --levels "${LEVELS:-1,2,3}" \
  --device "${DEVICE:-cuda}" --slots "${SLOTS:-14}" ${LIMIT:+--limit "$LIMIT"} --threads 1 --fill 0.85 --job-timeout "${JOB_S:-150}" \
  --budget-s "${BUDGET:-235}" --time-budget-s "${TB:-0.3}" --min-iters 20 --warmup-s "${WARM:-0.1}" \
  ${EST:+--estimates "$EST"} --cache-dir "$OUT/cache" \
  --out "$OUT/kb_baselines.json" --markdown "$OUT/kb_baselines.md" > /dev/null 2> "$OUT/kb_baselines.log"
echo "judge_baselines rc=$? wall=$(( $(date +%s) - t0 )) s"
kill $SMI 2>/dev/null
tar -C "$OUT" -czf "$OUT/cache.tgz" cache 2>/dev/null && rm -rf "$OUT/cache"
head -8 "$OUT/kb_baselines.md" 2>/dev/null || tail -20 "$OUT/kb_baselines.log"
