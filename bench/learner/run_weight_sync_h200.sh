#!/usr/bin/env bash
# Weight sync from the learner to an in-process engine on the H200 (results under $OUT):
#   bash bench/learner/run_weight_sync_h200.sh
# A LibTorch-only build (-DCAF_AGENT_LIBTORCH_ONLY=ON) of weight_sync_bench, then 5 rounds on a
# random Qwen2-0.5B-shaped model: fp32 masters on cuda, engine in bf16 on the same GPU; each round
# the in-process hand-off (bucketed copies, the engine's cast and staging, the swap at its next
# step) and the disk path (safetensors written, read back, cast, swapped). Caps (seconds, env):
# BT build, RT the run.
set -u
OUT=${OUT:-/tmp/weight-sync-h200}; mkdir -p "$OUT"
PY=${PY:-python3}
BUILD=${BUILD:-/tmp/weight-sync-build}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  $PY -c 'import torch; print(torch.__version__, torch.version.cuda)'; nproc; } 2>&1 | tee "$OUT/env.txt"
gen=$(command -v ninja > /dev/null && echo Ninja || echo "Unix Makefiles")
timeout "${BT:-300}" bash -c "cmake -S . -B '$BUILD' -G '$gen' -DCMAKE_BUILD_TYPE=Release \
  -DCAF_AGENT_LIBTORCH_ONLY=ON -DPython3_EXECUTABLE=\$(command -v $PY) > '$OUT/build.log' 2>&1 && \
  cmake --build '$BUILD' --target weight_sync_bench -j \$(nproc) >> '$OUT/build.log' 2>&1"
echo "build rc=$?"; tail -3 "$OUT/build.log"
timeout "${RT:-120}" "$BUILD/learner/weight_sync_bench" --device cuda --engine-dtype bfloat16 --rounds 5 \
  --dir /tmp/weight-sync-dir 2> "$OUT/run.log" | tee "$OUT/run.jsonl"
echo "run rc=${PIPESTATUS[0]}"; tail -3 "$OUT/run.log"
