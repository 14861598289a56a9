#!/usr/bin/env bash
# The learner's training benchmark on the H200 device machine, in one call (results under $OUT):
#   bash bench/learner/run_h200.sh [build|cpp|hf|long|all]...   (default: all)
# build: a LibTorch-only build (-DCAF_AGENT_LIBTORCH_ONLY=ON: no CAF, Boost or Debian packages)
#        of learner_tool into $BUILD; cpp: learner_tool bench on a random Qwen2-0.5B-shaped model,
#        bf16 compute over fp32 masters, per-layer recomputation, fused AdamW, at 8,192 packed
#        tokens (one sequence, and 8 x 1,024); hf: the same step in PyTorch eager Python
#        (bench_hf.py: transformers, bf16 autocast, gradient checkpointing, fused AdamW);
#        long: one 131,072-token trajectory in one step (peak memory reported);
#        cpp-norecompute: the 8,192-token step without per-layer recomputation (what the learner
#        runs when the activations fit: checkpoint_layers = false), and with the head's chunks kept.
# fused: the fastest step (no recomputation, head chunks kept) with the fused LM head and without
#        (--no-fused-head), at 8,192 tokens and at 2 x 8,192, the transformers step at both shapes,
#        and the fused head's gpu test (tests/learner/test_fused_head_gpu.py, against $TOOL).
# profile: that fastest step (no recomputation, head chunks kept) under the Kineto profiler (device
#        time by kernel and class in $OUT/profile-*.json), with each attention backend of
#        scaled_dot_product_attention (default, cudnn, efficient), and at 2 x 8,192 tokens a step.
# Each bench prints one JSON line: tokens_per_second, step_seconds, mfu (torchtitan's
# definition, peak 989 TFLOP/s; the formula is in learner/learner_tool.cpp and bench_hf.py),
# peak_memory_bytes. Caps (seconds, env): BT build, CT each C++ bench, HT each HF bench.
# STEPS: timed steps per bench (default 5, after one warm-up step).
set -u
OUT=${OUT:-/tmp/learner-h200}; mkdir -p "$OUT"
PY=${PY:-python3}
BUILD=${BUILD:-/tmp/learner-build}
STEPS=${STEPS:-5}
TOOL=${TOOL:-$BUILD/learner/learner_tool}
COMMON=(--device cuda --dtype bfloat16 --checkpoint-layers --chunk 4096 --steps "$STEPS")
steps=${*:-all}; [ "$steps" = all ] && steps="build cpp hf long"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv
  $PY -c 'import sys,torch; print(sys.version); print(torch.__version__, torch.version.cuda)'
  $PY -c 'import transformers; print("transformers", transformers.__version__)' 2>&1; nproc; } 2>&1 | tee "$OUT/env.txt"
for s in $steps; do
  case $s in
  build)
    gen=$(command -v ninja > /dev/null && echo Ninja || echo "Unix Makefiles")
    timeout "${BT:-420}" bash -c "cmake -S . -B '$BUILD' -G '$gen' -DCMAKE_BUILD_TYPE=Release \
      -DCAF_AGENT_LIBTORCH_ONLY=ON -DPython3_EXECUTABLE=\$(command -v $PY) > '$OUT/build.log' 2>&1 && \
      cmake --build '$BUILD' --target learner_tool weight_sync_bench -j \$(nproc) >> '$OUT/build.log' 2>&1"
    echo "build rc=$?"; tail -3 "$OUT/build.log" ;;
  cpp)
    for seq in 8192 1024; do
      timeout "${CT:-240}" "$TOOL" bench --context 8192 --seq-len $seq "${COMMON[@]}" \
        2>> "$OUT/cpp.log" | tee -a "$OUT/cpp.jsonl"
      echo "cpp seq-len $seq rc=${PIPESTATUS[0]}"
    done
    # The same at one sequence, the LM head's chunks kept for the backward (one matmul less).
    timeout "${CT:-240}" "$TOOL" bench --context 8192 "${COMMON[@]}" --no-head-recompute \
      2>> "$OUT/cpp.log" | tee -a "$OUT/cpp.jsonl"
    echo "cpp no-head-recompute rc=${PIPESTATUS[0]}" ;;
  cpp-norecompute)
    NR=(--device cuda --dtype bfloat16 --chunk 4096 --steps "$STEPS")
    timeout "${CT:-240}" "$TOOL" bench --context 8192 "${NR[@]}" 2>> "$OUT/cpp.log" | tee -a "$OUT/cpp-norecompute.jsonl"
    echo "cpp no recompute rc=${PIPESTATUS[0]}"
    timeout "${CT:-240}" "$TOOL" bench --context 8192 "${NR[@]}" --no-head-recompute \
      2>> "$OUT/cpp.log" | tee -a "$OUT/cpp-norecompute.jsonl"
    echo "cpp no recompute, no head recompute rc=${PIPESTATUS[0]}" ;;
  fused)
    # Most telling first (a caller's overall timeout keeps what finished): the fused step at
    # 2 x 8k and 8k, transformers at 2 x 8k, the gpu test, then the composite and transformers at 8k.
    NR=(--device cuda --dtype bfloat16 --chunk 4096 --steps "$STEPS" --no-head-recompute)
    two="--context 16384 --seq-len 8192"; one="--context 8192"
    run_cpp() { timeout "${CT:-90}" "$TOOL" bench "$@" "${NR[@]}" 2>> "$OUT/fused.log" | tee -a "$OUT/fused.jsonl"
                echo "cpp [$*] rc=${PIPESTATUS[0]}"; }
    run_hf() { timeout "${HT:-120}" $PY bench/learner/bench_hf.py "$@" --steps "$STEPS" 2>> "$OUT/fused.log" \
                 | tee -a "$OUT/fused.jsonl"; echo "hf [$*] rc=${PIPESTATUS[0]}"; }
    run_cpp $two; run_cpp $one; run_hf $two
    tdir=$(mktemp -d); mkdir -p "$tdir/learner"; ln -s "$TOOL" "$tdir/learner/learner_tool"
    CAF_AGENT_BUILD_DIR=$tdir timeout 120 $PY -m pytest tests/learner/test_fused_head_gpu.py -q -m gpu \
      -p no:cacheprovider ${FUSED_TEST_K:+-k "$FUSED_TEST_K"} > "$OUT/fused-test.log" 2>&1
    echo "fused head gpu test rc=$?"; tail -2 "$OUT/fused-test.log"
    run_cpp $two --no-fused-head; run_cpp $one --no-fused-head; run_hf $one ;;
  profile)
    NR=(--device cuda --dtype bfloat16 --chunk 4096 --steps "$STEPS" --no-head-recompute)
    for sdpa in default cudnn efficient; do
      timeout "${CT:-240}" "$TOOL" bench --context 8192 "${NR[@]}" --sdpa $sdpa --profile "$OUT/profile-$sdpa.json" \
        2>> "$OUT/profile.log" | tee -a "$OUT/profile.jsonl"
      echo "profile sdpa $sdpa rc=${PIPESTATUS[0]}"
    done
    timeout "${CT:-240}" "$TOOL" bench --context 16384 --seq-len 8192 "${NR[@]}" 2>> "$OUT/profile.log" \
      | tee -a "$OUT/profile.jsonl"
    echo "profile 2 x 8192 rc=${PIPESTATUS[0]}"
    gzip -f "$OUT"/profile-*.trace.json ;;
  hf)
    for seq in 8192 1024; do
      timeout "${HT:-240}" $PY bench/learner/bench_hf.py --context 8192 --seq-len $seq --steps "$STEPS" \
        2>> "$OUT/hf.log" | tee -a "$OUT/hf.jsonl"
      echo "hf seq-len $seq rc=${PIPESTATUS[0]}"
    done ;;
  long)
    timeout "${CT:-300}" "$TOOL" bench --context 131072 --device cuda --dtype bfloat16 --checkpoint-layers \
      --chunk 4096 --steps 1 2>> "$OUT/long.log" | tee -a "$OUT/long.jsonl"
    echo "long rc=${PIPESTATUS[0]}" ;;
  esac
done
