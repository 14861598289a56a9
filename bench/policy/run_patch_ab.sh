#!/usr/bin/env bash
# Patches timed against the tree they apply to, on one device machine in one call (results under
# $OUT), from a copy of the tree that may be changed (the device machine's is):
#   PATCH=some.patch RUNS="long|;cached|;cached|--overlap" OUT=... bash bench/policy/run_patch_ab.sh
# 1. A: this tree built (bench_generate.build_tool, LibTorch only) into $BUILD; its
#    policy_model_tool is kept aside ($BUILD/ab-tool-a). PATCH names one patch or several
#    (space-separated): each in turn is applied to this tree alone, in place (git apply, else
#    patch -p1), $BUILD built again (only what it touches recompiles), its tool kept aside
#    ($BUILD/ab-tool-<side>: side b for one patch, else b1, b2, .. in PATCH's order), and the
#    patch taken out again.
# 2. GATE: pytest arguments (the patched tree's tests) run against each patch's build, before it is
#    taken out (gate-tests-<side>.log); GATE_SOFT=1 goes on when they fail (an A/B whose speed is
#    wanted whichever way the tests go), else the call stops there. GATE_REPEAT=N runs them N times
#    a side (gate-tests-<side>-rK.log); GATE_A=1 gates A's build too, first. GATE_<side> (GATE_a,
#    GATE_b, GATE_b2, ..): that side's pytest arguments instead of GATE, for a patch's own tests
#    that the other sides' trees do not have (a `-k` in GATE that selects only them leaves the
#    other sides ungated, pytest's rc 5).
# 3. MICRO: a kernel bench and its arguments (or several, ';'-separated), run with each side's tool
#    in turn (a first).
# 4. RUNS: ';'-separated "workload|bench_agent.py flags" (workload batch, long or cached), each
#    run with every side's tool in turn, A first (bench_agent.py --tool), each capped at RUN_S
#    seconds (agent-K-<side>.json), with COMMON flags added to every run (e.g. --kv-cache-dtype
#    fp8_e4m3). A runs right before the patches each time (a drift of the card within a set falls
#    on them). Runs of the workloads in PROFILE (default long) also profile their steps
#    (bench_agent.py --profile-out; in the first round only).
#    ROUNDS=N (default 1): each run's sides N times over, interleaved (a b1 .. a b1 ..), as
#    agent-K-<side>-rR.json; summarize.py then gives each side's median and its ratio to A's.
#    Why: one run a side moved 4-5% between calls and within one on an H100
#    (bench/results/2026-12-06-policy-h100-held-patches.md), the size of what a patch is for.
# Why: a patch's kernels are timed against the ones it replaces on the same card in the same call,
# not against figures of another machine or day; several patches in one call share A's build and
# the card.
# PREBUILT (a folder carried to the device, bench/policy/prebuilt.py build --patch ..): each side's
# tool from there instead of its build (the folder's own tool or one under its sides/, whichever
# stamp fits the tree with the side's patch applied, whatever its name), where torch fits too and
# $BUILD is not configured yet; build-<side>.log says which ran. A side that builds configures
# $BUILD, so the sides after it build too (incrementally).
# PACK=1: everything under $OUT packed into $OUT/patch-ab.tgz whenever the script exits. STOP_AT
# (seconds since the epoch): every step's cap cut to end by then (cap in device_env.sh), so that a
# call that runs short of time still packs what it measured.
set -u
OUT=${OUT:-/tmp/patch-ab}; mkdir -p "$OUT"
PY=${PY:-python3}
BUILD=${BUILD:-/tmp/patch-ab-build}
PATCH=${PATCH:?PATCH names the patch files, relative to this tree}
START=$(date +%s)
at() { echo "at $(( $(date +%s) - START )) s"; }
# Whenever the script exits (at its end, on an error, or on TERM once the step under way has ended):
# a patch still applied taken out, the summary, machine paths scrubbed (scrub_paths in
# device_env.sh), then PACK's archive.
applied=
finish() {
  if [ -n "$applied" ]; then git apply -R "$applied" 2>/dev/null || patch -p1 -s -R < "$applied"; fi
  $PY bench/policy/summarize.py "$OUT" > "$OUT/summary.md" 2>&1; cat "$OUT/summary.md"
  scrub_paths "$OUT" "$BUILD"
  if [ "${PACK:-0}" = 1 ]; then
    pack_out "$OUT" patch-ab
  fi
}
trap 'echo "stopped $(at)"; exit 143' TERM INT
trap finish EXIT
. bench/policy/device_env.sh
write_device_env "$OUT"
build() {  # build LOG [PREBUILT_FOLDER]
  timeout "$(cap ${BUILD_S:-240})" $PY -c "import pathlib, sys; sys.path.insert(0, 'bench/policy'); import bench_generate; \
bench_generate.build_tool(pathlib.Path('$BUILD'), prebuilt='${2:-}' or None)" > "$1" 2>&1
}
# The patches' files touched first: a $BUILD left by an earlier call holds a patched build's
# objects, which ninja would otherwise take as A's where the copied files are older.
read -ra patches <<< "$PATCH"
for p in "${patches[@]}"; do
  [ -f "$p" ] || { echo "PATCH names $p, which is not a file of this tree"; exit 2; }
  sed -n 's|^+++ b/||p' "$p" | while read -r f; do [ -f "$f" ] && touch "$f"; done
done
# gate SIDE: GATE (pytest's words) against $BUILD's tool, GATE_REPEAT times (default 1; an
# intermittent failure needs several runs to show), each log gate-tests-SIDE.log (gate-tests-SIDE-rK.log
# when repeated); status nonzero when a run failed and GATE_SOFT is not 1. No GATE: nothing, 0.
gate() {
  local side=$1 repeat=${GATE_REPEAT:-1} r rc failed=0 log words=${GATE:-} own="GATE_$1"
  [ -n "${!own:-}" ] && words=${!own}
  [ -n "$words" ] || return 0
  [[ $repeat =~ ^[1-9][0-9]*$ ]] || { echo "GATE_REPEAT must be a whole number >= 1, not '$repeat'"; return 2; }
  for ((r = 1; r <= repeat; r++)); do
    log=$OUT/gate-tests-$side.log; [ "$repeat" -gt 1 ] && log=$OUT/gate-tests-$side-r$r.log
    # shellcheck disable=SC2086  # GATE is pytest's words
    CAF_AGENT_BUILD_DIR=$BUILD timeout "$(cap ${GATE_S:-120})" $PY -m pytest -v -m gpu $words > "$log" 2>&1
    rc=$?; echo "gate tests ($side, run $r of $repeat) rc=$rc $(at)"; tail -n 3 "$log"
    [ $rc = 0 ] || failed=$rc
  done
  [ $failed = 0 ] || [ "${GATE_SOFT:-0}" = 1 ] || return $failed
}
build "$OUT/build-a.log" "${PREBUILT:-}"; rc=$?; echo "build a rc=$rc $(at)"; grep -h "^prebuilt: " "$OUT/build-a.log"
[ $rc = 0 ] || { tail -n 5 "$OUT/build-a.log"; exit 3; }
cp "$BUILD/policy/model/policy_model_tool" "$BUILD/ab-tool-a"
# GATE_A=1: the gate on this tree too, before any patch (a test that may fail on both trees).
if [ "${GATE_A:-0}" = 1 ]; then gate a || exit $?; fi
# Each patch alone on this tree, in turn: applied, built, gated, taken out again. Its side is b
# (one patch) or b1, b2, .. in PATCH's order; its tool $BUILD/ab-tool-<side>.
sides=(a)
k=0
for p in "${patches[@]}"; do
  k=$((k + 1))
  side=b; [ ${#patches[@]} -gt 1 ] && side=b$k
  # (patch tried dry first: a patch that does not apply leaves no .rej files in the tree)
  if ! { git apply "$p" 2>/dev/null ||
    { patch -p1 -s --forward --dry-run < "$p" > /dev/null && patch -p1 -s --forward < "$p"; }; }; then
    echo "PATCH $p does not apply to this tree"; exit 2
  fi
  applied=$p
  build "$OUT/build-$side.log" "${PREBUILT:-}"; rc=$?; echo "build $side ($p) rc=$rc $(at)"
  grep -h "^prebuilt: " "$OUT/build-$side.log"
  [ $rc = 0 ] || { tail -n 5 "$OUT/build-$side.log"; exit 3; }
  cp "$BUILD/policy/model/policy_model_tool" "$BUILD/ab-tool-$side"
  gate "$side" || exit $?
  if ! { git apply -R "$p" 2>/dev/null || patch -p1 -s -R < "$p"; }; then
    echo "PATCH $p does not come out of this tree again"; exit 2
  fi
  applied=
  sides+=("$side")
done
# MICRO: a kernel bench and its arguments (e.g. "bench/policy/bench_fp8_attention.py --calls 50"),
# or several ';'-separated, run with each side's tool (--tool; micro-<side>.json, its table in
# micro-<side>.md; with several, micro-<side>-K.*).
if [ -n "${MICRO:-}" ]; then
  IFS=';' read -ra micros <<< "$MICRO"
  for side in "${sides[@]}"; do
    tool=$BUILD/ab-tool-$side
    k=0
    for micro in "${micros[@]}"; do
      k=$((k + 1))
      name=micro-$side; [ ${#micros[@]} -gt 1 ] && name=micro-$side-$k
      # shellcheck disable=SC2086  # the script's words
      timeout "$(cap ${MICRO_S:-120})" $PY $micro --tool "$tool" --out "$OUT/$name.json" > "$OUT/$name.md" 2>&1
      echo "$name rc=$? $(at)"; cat "$OUT/$name.md"
    done
  done
fi
IFS=';' read -ra runs <<< "${RUNS:-}"
rounds=${ROUNDS:-1}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a whole number >= 1, not '$rounds'"; exit 2; }
k=0
for run in "${runs[@]}"; do
  k=$((k + 1))
  what=${run%%|*} flags=${run#*|}
  case $what in batch) skip="cached long" ;; long) skip="batch cached" ;; cached) skip="batch long" ;;
    *) echo "run $k: workload '$what' is not batch, long or cached"; continue ;; esac
  for ((r = 1; r <= rounds; r++)); do
    for side in "${sides[@]}"; do
      tool=$BUILD/ab-tool-$side
      name=$k-$side label=$side
      [ "$rounds" -gt 1 ] && name=$k-$side-r$r label="$side round $r"
      profile=()
      if [ $r = 1 ]; then case " ${PROFILE-long} " in *" $what "*) profile=(--profile-out "$OUT/$k-$side") ;; esac; fi
      # shellcheck disable=SC2086  # flags are words
      timeout "$(cap ${RUN_S:-60})" $PY bench/policy/bench_agent.py --tool "$tool" ${COMMON:-} $flags --skip $skip \
        --skip-uncached "${profile[@]}" --out "$OUT/agent-$name.json" > "$OUT/agent-$name.log" 2>&1
      echo "run $k $label ($what $flags) rc=$? $(at)"
    done
  done
done
