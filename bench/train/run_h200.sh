#!/usr/bin/env bash
# One agentic PPO iteration (two, the second one warm) with the Qwen2-0.5B shape on the H200
# device machine, everything in one process: caf-agent --role local with
# config/h200-iteration.toml (in-process engine, the judge's CUDA slot, the learner, in-process
# weight sync; the replies teacher-forced from the recorded CUDA demonstrations). Results under $OUT:
#   BIN=DIR bash bench/train/run_h200.sh
# BIN: a directory holding caf-agent built against the device's torch (bench/train/README.md:
#   how it is built off the device) and lib/ with the shared libraries the image lacks (CAF,
#   Boost, fmt, toml++, re2) and bwrap. Caps (seconds, env): MT model, RT the run.
# Files under $OUT: env.txt, make_model.json, config.toml, run.log, iterations.jsonl,
# phases.jsonl (the "phases" events), records.jsonl (per episode: task, reward, turns, timings), smi.csv.
set -u
OUT=${OUT:-/tmp/train-h200}; mkdir -p "$OUT"
PY=${PY:-python3}
BIN=$(cd "${BIN:?BIN must name the directory with caf-agent}" && pwd)
MODEL=${MODEL:-runs/qwen2-0.5b-random}
TOKENIZER=${TOKENIZER:-models/tiny-qwen2}  # ./x setup makes it; off the checkout, carry its tokenizer files
RUN_DIR=${RUN_DIR:-runs/h200-iteration}
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
TL=$($PY -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
# The CUDA runtime and NVRTC caf-agent links: the pip nvidia packages beside torch, else the toolkit's.
CU=$($PY -c 'import glob, os, nvidia; print(":".join(glob.glob(os.path.join(nvidia.__path__[0], "*", "lib"))))' 2>/dev/null)
export LD_LIBRARY_PATH="$BIN/lib:$TL:${CU:+$CU:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="$BIN:$PATH"  # bwrap, when the image has none
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  $PY -c 'import sys, torch, transformers; print(sys.version); print(torch.__version__, torch.version.cuda, "transformers", transformers.__version__)'
  nvcc --version | tail -1; nproc; grep PRETTY /etc/os-release
  echo "missing libraries:"; ldd "$BIN/caf-agent" | grep "not found"; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
rm -rf "$RUN_DIR"
timeout "${MT:-120}" $PY bench/train/make_model.py --out "$MODEL" --tokenizer "$TOKENIZER" | tee "$OUT/make_model.json"
# The sandbox: bubblewrap when it works here, else none (a throwaway machine running a
# scripted policy; the note in run.log says which).
iso=bwrap
bwrap --unshare-all --die-with-parent --ro-bind / / true > "$OUT/bwrap.txt" 2>&1 || iso=none
echo "sandbox isolation: $iso" | tee -a "$OUT/env.txt"
sed -e "s|^worker_python = .*|worker_python = \"$(command -v $PY)\"|" \
    -e "s|^model_dir = .*|model_dir = \"$MODEL\"|" -e "s|^run_dir = .*|run_dir = \"$RUN_DIR\"|" \
    -e "s|^workspace_root = .*|workspace_root = \"$RUN_DIR/workspaces\"\nisolation = \"$iso\"|" \
    config/h200-iteration.toml > "$OUT/config.toml"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu,memory.used --format=csv -lms 500 \
  > "$OUT/smi.csv" 2>&1 &
SMI=$!
start=$(date +%s)
timeout "${RT:-240}" "$BIN/caf-agent" --role local --config "$OUT/config.toml" > "$OUT/run.log" 2>&1
rc=$?
echo "run rc=$rc wall $(( $(date +%s) - start )) s" | tee -a "$OUT/env.txt"
kill $SMI 2> /dev/null
cp "$RUN_DIR/train/iterations.jsonl" "$OUT/" 2> /dev/null
grep '"event":"phases"' "$OUT/iterations.jsonl" > "$OUT/phases.jsonl" 2> /dev/null
$PY - "$RUN_DIR/train/trajectories" > "$OUT/records.jsonl" 2> "$OUT/records.err" <<'PYEOF'
# One line per episode: the record's outcome, clocks and what the engine returned for its turns.
import glob, json, struct, sys
import msgpack
for seg in sorted(glob.glob(sys.argv[1] + "/segment-*.msgpack")):
    data, pos = open(seg, "rb").read(), 0
    while pos + 12 <= len(data):  # frames: magic, length, crc, msgpack body
        (n,) = struct.unpack("<I", data[pos + 4:pos + 8])
        r = msgpack.unpackb(data[pos + 12:pos + 12 + n], raw=False)
        pos += 12 + n
        lp = [x for x, m in zip(r["logprobs"], r["loss_mask"]) if m]
        print(json.dumps({k: r.get(k) for k in ("episode_id", "task_id", "reward", "correct", "termination",
                                                 "turns", "timings_ms", "policy_versions")} |
                         {"tokens": len(r["tokens"]), "sampled_tokens": len(lp),
                          "mean_sampled_logprob": sum(lp) / max(len(lp), 1),
                          "verdict": str(r.get("verdict"))[:300]}))
PYEOF
grep -E "phases|published|iteration|error|Error" "$OUT/run.log" | tail -25
