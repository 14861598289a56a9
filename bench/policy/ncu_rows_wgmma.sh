#!/usr/bin/env bash
# Nsight Compute's view of bench/policy/bench_rows_wgmma.cu's kernel at one launch a shape, beside
# cuBLAS's kernels for the same product, so that what each spends its time on (the bytes in flight,
# the warps' stalls, the multiprocessors' idle start and tail) can be compared where the bench's
# timings alone only say which is faster:
#   ROWS=/path/to/bench_rows_wgmma OUT=dir bash bench/policy/ncu_rows_wgmma.sh "o 1,8,8" "down 1,8,8" ..
# Each argument is "SHAPE TILES,STAGES,SHARES". For each: ncu-wgmma-SHAPE.txt (the kernel's four
# checking launches, at 1, 7, 33 and 64 rows: the last is the 64-row one) and ncu-cublas-SHAPE.txt
# (every kernel of the cuBLAS call's four checks, with the float reference kernel between them and
# the bias or silu_mul kernel after them, from the first kernel after the bench's fills). The clocks
# are left alone (--clock-control none) and the caches flushed before each profiled kernel, so each
# reads its weights from memory, as a decode step's layers do.
# SOURCE=1: also the 64-row launch of the kernel alone exported (ncu-wgmma-SHAPE.ncu-rep) and its
# source page printed, where the warps' stall samples are counted by SASS instruction
# (ncu-wgmma-SHAPE-source.csv; build the bench with -lineinfo so they map to its lines).
set -u
ROWS=${ROWS:?ROWS names the built bench_rows_wgmma}
OUT=${OUT:?OUT names the folder for the reports}
NCU=${NCU:-ncu}
mkdir -p "$OUT"
# SourceCounters: as text, its summary only (branches); the stall sampling by instruction is on the
# source page of an exported report (ncu -o, then ncu -i REPORT --page source).
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
  --section SchedulerStats --section Occupancy --section LaunchStats --section SourceCounters)
for spec in "$@"; do
  read -r shape launch <<< "$spec"
  case $shape in
    qkv) n=1152 d=896 bias=1 ;;
    o) n=896 d=896 bias=0 ;;
    gate_up|gate_up_silu) n=9728 d=896 bias=0 ;;
    down) n=896 d=4864 bias=0 ;;
    *) echo "ncu_rows_wgmma: unknown shape '$shape' (qkv, o, gate_up, gate_up_silu, down)" >&2; exit 2 ;;
  esac
  # The bench's fills before its first check: x, each copy of the weights (256 MB of copies, at
  # least 2), the bias.
  copies=$(( (256 << 20) / (n * d * 2) )); [ "$copies" -lt 2 ] && copies=2
  skip=$(( 1 + copies + bias ))
  timeout "${NCU_S:-120}" "$NCU" --clock-control none --cache-control all "${sections[@]}" \
    -k regex:rows_wgmma --launch-count 4 "$ROWS" --shape "$shape" --launch "$launch" --reps 1 \
    > "$OUT/ncu-wgmma-$shape.txt" 2>&1
  echo "ncu-wgmma-$shape rc=$?"
  timeout "${NCU_S:-120}" "$NCU" --clock-control none --cache-control all "${sections[@]}" \
    --launch-skip "$skip" --launch-count 16 "$ROWS" --shape "$shape" --launch "$launch" --reps 1 \
    > "$OUT/ncu-cublas-$shape.txt" 2>&1
  echo "ncu-cublas-$shape rc=$?"
  if [ "${SOURCE:-0}" = 1 ]; then
    timeout "${NCU_S:-120}" "$NCU" --clock-control none --cache-control all --section WarpStateStats \
      --section SourceCounters --import-source yes -k regex:rows_wgmma --launch-skip 3 --launch-count 1 \
      -f -o "$OUT/ncu-wgmma-$shape" "$ROWS" --shape "$shape" --launch "$launch" --reps 1 \
      > "$OUT/ncu-wgmma-$shape-export.log" 2>&1
    echo "ncu-wgmma-$shape export rc=$?"
    timeout 60 "$NCU" -i "$OUT/ncu-wgmma-$shape.ncu-rep" --page source --print-source sass --csv \
      > "$OUT/ncu-wgmma-$shape-source.csv" 2>&1
    echo "ncu-wgmma-$shape source page rc=$?"
  fi
done
