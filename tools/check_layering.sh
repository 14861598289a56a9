#!/usr/bin/env bash
# Libraries never include CAF (docs/ARCHITECTURE.md, "Layers"); policy/ and learner/
# also stay free of Boost so they build with LibTorch alone.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
for dir in sandbox policy learner gpu_pool datasets serving; do
  [ -d "$dir" ] || continue
  if hits=$(grep -rnE '#\s*include\s*[<"]caf/' "$dir" --include='*.hpp' --include='*.cpp' --include='*.h'); then
    echo "layering: $dir/ includes CAF:"; echo "$hits"; fail=1
  fi
done
for dir in policy learner; do
  [ -d "$dir" ] || continue
  if hits=$(grep -rnE '#\s*include\s*[<"]boost/' "$dir" --include='*.hpp' --include='*.cpp' --include='*.h'); then
    echo "layering: $dir/ includes Boost:"; echo "$hits"; fail=1
  fi
done
# std::filesystem::remove_all can bind to the copy the LibTorch wheel exports, which crashed on
# the GPU image: trees are removed with base/remove_tree.hpp (nftw) instead.
for dir in base sandbox policy learner gpu_pool datasets serving messages rollout observe actors runtime bench; do
  [ -d "$dir" ] || continue
  if hits=$(grep -rnE '\bremove_all\s*\(' "$dir" --include='*.hpp' --include='*.cpp' --include='*.h'); then
    echo "layering: $dir/ calls std::filesystem::remove_all (use base::remove_tree):"; echo "$hits"; fail=1
  fi
done
if [ "$fail" -eq 0 ]; then echo "layering: ok"; fi
exit "$fail"
