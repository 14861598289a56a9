#!/usr/bin/env bash
# Builds bench/policy/bench_cutlass_rows.cu against CUTLASS's headers from PyPI (the package
# nvidia-cutlass carries them under cutlass_library/source/include), here or on a machine with
# nvcc and no network once the wheel has been fetched. Nothing of CUTLASS enters the engine's
# build: this is the bench that says whether it should.
#
#   bash bench/policy/build_cutlass_rows.sh            -> prebuilt/bench_cutlass_rows
#   OUT=path CUTLASS_CACHE=dir CUTLASS_WHEEL=path/to/nvidia_cutlass-4.2.0.0-py3-none-any.whl PYTHON=python3 bash ...
# (CUTLASS_CACHE: where the headers are unpacked once, default prebuilt/cutlass-4.2.0.0; a wheel
# already fetched is used instead of PyPI)
#
# Run it on the GPU machine with cuBLAS where nvcc's is (the binary links libcublas.so.13):
#   LD_LIBRARY_PATH=$(dirname $(which nvcc))/../lib64 prebuilt/bench_cutlass_rows --reps 20
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
VERSION=4.2.0.0
CACHE="${CUTLASS_CACHE:-$ROOT/prebuilt/cutlass-$VERSION}"
OUT="${OUT:-$ROOT/prebuilt/bench_cutlass_rows}"
WHEEL="${CUTLASS_WHEEL:-}"
PYTHON="${PYTHON:-python3}"
if [ ! -d "$CACHE/cutlass_library/source/include/cutlass" ]; then
  mkdir -p "$CACHE"
  if [ -z "$WHEEL" ]; then
    "$PYTHON" -m pip download --quiet --no-deps --dest "$CACHE" "nvidia-cutlass==$VERSION"
    WHEEL="$CACHE/nvidia_cutlass-$VERSION-py3-none-any.whl"
  fi
  [ -f "$WHEEL" ] || { echo "build_cutlass_rows: no wheel at $WHEEL" >&2; exit 2; }
  "$PYTHON" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$WHEEL" "$CACHE"
fi
mkdir -p "$(dirname "$OUT")"
# -DNDEBUG: CUTLASS's device asserts are calls, which serialise the kernels' wgmma (ptxas C7510).
nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
  -DCUTLASS_ENABLE_GDC_FOR_SM90 -diag-suppress 177 -I"$CACHE/cutlass_library/source/include" \
  -o "$OUT" "$ROOT/bench/policy/bench_cutlass_rows.cu" -lcublas
echo "built $OUT"
