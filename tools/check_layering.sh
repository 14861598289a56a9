#!/usr/bin/env bash
# Libraries never include CAF (docs/ARCHITECTURE.md, "Layers"); policy/ and learner/
# also stay free of Boost so they build with LibTorch alone; actors/ holds only actors;
# tests/ mirrors the source folders.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
# rollout/ and observe/ use the message structs (messages/ is the one folder besides actors/ and
# runtime/ that includes CAF, for inspect and the type ids) but never the actor API themselves.
for dir in sandbox policy learner gpu_pool datasets serving cluster base rollout observe; do
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
for dir in base sandbox policy learner gpu_pool datasets serving messages cluster rollout observe actors runtime bench; do
  [ -d "$dir" ] || continue
  if hits=$(grep -rnE '\bremove_all\s*\(' "$dir" --include='*.hpp' --include='*.cpp' --include='*.h'); then
    echo "layering: $dir/ calls std::filesystem::remove_all (use base::remove_tree):"; echo "$hits"; fail=1
  fi
done
# actors/ holds actors: a file there that includes no CAF header is library code and belongs in
# a library folder (gpu_pool/slot_backend, sandbox/workspace_layout, cluster/node_registry,
# base/log moved out for that reason).
for f in actors/*.cpp actors/*.hpp; do
  [ -e "$f" ] || continue
  grep -qE '#\s*include\s*[<"]caf/' "$f" && continue
  echo "layering: $f is not an actor (it includes no CAF header): move it to a library folder"; fail=1
done
# tests/ mirrors the source folders: tests/X/ tests the folder X/. Rationale for the two
# others: reward_hacks/ holds the adversarial submissions of the judge (STYLE.md), support/
# the helpers tests share.
for d in tests/*/; do
  name=$(basename "$d")
  case "$name" in reward_hacks|support) continue ;; esac
  if [ ! -d "$name" ]; then echo "layering: tests/$name/ has no source folder $name/"; fail=1; fi
done
for dir in actors base cluster datasets gpu_pool learner messages observe policy rollout runtime sandbox serving; do
  if [ -d "$dir" ] && [ ! -d "tests/$dir" ]; then echo "layering: $dir/ has no tests/$dir/"; fail=1; fi
done
if [ "$fail" -eq 0 ]; then echo "layering: ok"; fi
exit "$fail"
