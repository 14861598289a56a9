#!/usr/bin/env bash
# The datasets' GPU run, in one device call (results under $OUT):
#   bash datasets/run_h200.sh KERNELBENCH_CHECKOUT
# 1. synth: the pipeline synthesizes and filters N candidates on the GPU (the paper's eager
#    bounds, 1-100 ms), decontaminated against KernelBench levels 1-3; per-slot throughput
#    and the kept/rejected breakdown in synth/report.json.
# 2. kernelbench: caf_agent_data.evaluate over levels 1-3: judge-style load and validation,
#    eager times (slots take turns timing), then torch.compile within a budget.
# Caps (seconds, env; a step past its cap is stopped and writes what it has): ST synth, KT
# kernelbench; CB the compile pass's budget. SLOTS_S,
# SLOTS_K: slots of each step. Steps run one after the other, never side by side.
set -u
KB=${1:?usage: datasets/run_h200.sh KERNELBENCH_CHECKOUT}
OUT=${OUT:-/tmp/datasets-h200}; mkdir -p "$OUT"
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
export PYTHONPATH="$PWD/datasets${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# Rationale: slots compile side by side on 16 cores; inductor's default of one compile
# thread per core each would oversubscribe them.
export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-2}
# torch.compile needs a C compiler for its launchers; the image keeps its gcc under /opt/gcc.
[ -x /opt/gcc/bin/gcc ] && export CC=${CC:-/opt/gcc/bin/gcc} CXX=${CXX:-/opt/gcc/bin/g++}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv 2>&1
  $PY -c 'import sys, torch; print(sys.version); print("torch", torch.__version__, torch.version.cuda)'
  $PY -c 'import transformers; print("transformers", transformers.__version__)' 2>&1 | tail -1
  nproc; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
HF=""; $PY -c 'import transformers' 2>/dev/null || HF="--no-transformers"
t0=$(date +%s)
# The dataset itself stays on the machine (too many files to bring back); its manifest and
# report are copied to $OUT.
SYN=${SYN:-/tmp/datasets-synth}
timeout "${ST:-90}" $PY -m caf_agent_data.pipeline --out "$SYN" --seed 0 --count "${N:-1000}" \
  --max-candidates "${N:-1000}" --eval-set "$KB" --device "$DEVICE" --min-ms "${MIN_MS:-1}" --max-ms 100 \
  --scale "${SCALE:-16}" --batch-scale "${BATCH_SCALE:-4}" --max-numel $((1 << 26)) --slots "${SLOTS_S:-14}" \
  --timeout-s 30 --determinism-atol "${DET_ATOL:-1e-5}" \
  --time-budget-s 0.05 --force $HF 2> "$OUT/synth.log" | tee "$OUT/synth_summary.txt"
echo "synth rc=${PIPESTATUS[0]} wall=$(( $(date +%s) - t0 )) s"
cp "$SYN/manifest.jsonl" "$SYN/report.json" "$OUT/" 2>/dev/null
grep "filter:" "$OUT/synth.log" | tail -1
t0=$(date +%s)
timeout "${KT:-100}" $PY -m caf_agent_data.evaluate --tasks "$KB" --levels 1,2,3 --device "$DEVICE" \
  --slots "${SLOTS_K:-12}" --serial-timing --time-budget-s 0.05 --timeout-s 40 --compile \
  --compile-timeout-s 25 --compile-budget-s "${CB:-10}" ${LIMIT:+--limit "$LIMIT"} \
  --out "$OUT/kb.json" --markdown "$OUT/kb.md" > /dev/null 2> "$OUT/kb.log"
echo "kernelbench rc=$? wall=$(( $(date +%s) - t0 )) s"
head -6 "$OUT/kb.md" 2>/dev/null || tail -5 "$OUT/kb.log"
