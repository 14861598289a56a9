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
if [ "$fail" -eq 0 ]; then echo "layering: ok"; fi
exit "$fail"
