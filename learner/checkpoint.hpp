#pragma once
// checkpoint: the learner's state on disk, written atomically, resumed exactly.
//
// Layout of one checkpoint, `<root>/step-<8 digits>/`:
//   <part>/config.json, <part>/model.safetensors   each model (actor, critic) as a Hugging Face
//                                                  checkpoint (decoder::save; the engine and
//                                                  transformers load it; the critic adds
//                                                  value_head.*)
//   <part>.optimizer.safetensors                   AdamW moments (fp32, by parameter name)
//   rng_cpu.bin, rng_cuda<i>.bin                    torch's default generators' states
//   trainer_state.json                             format, version, step, data cursor, each
//                                                  optimizer's step count, the RNG files
// and `<root>/latest` names the newest one. A checkpoint is written into a temporary directory
// beside it, every file and the directory fsynced, then renamed into place (rename is atomic on
// POSIX), then `latest` is replaced the same way: a crash leaves the previous checkpoint intact.

#include <cstdint>
#include <string>
#include <vector>

#include "learner/optimizer.hpp"
#include "learner/result.hpp"
#include "policy/model/decoder.hpp"

namespace caf_agent::learner {

/// One model and its optimizer, saved under `name` ("actor", "critic").
struct checkpoint_part {
  std::string name;                  ///< Directory / file prefix inside the checkpoint.
  policy::decoder* model = nullptr;  ///< Weights (saved; on load, assigned in place).
  adamw* optimizer = nullptr;        ///< Its optimizer (may be null: weights only).
};

/// Position of the training run.
struct checkpoint_cursor {
  int64_t step = 0;         ///< Training steps done.
  int64_t data_cursor = 0;  ///< Index of the next batch / trajectory to read.
};

/// The version written into trainer_state.json; a different one is refused on load.
inline constexpr int64_t checkpoint_version = 1;

/// Writes `<root>/step-<cursor.step>` atomically and points `<root>/latest` at it; returns the
/// checkpoint's directory. Errors: an existing checkpoint of that step, I/O failures.
result<std::string> save_checkpoint(const std::string& root, const checkpoint_cursor& cursor,
                                    const std::vector<checkpoint_part>& parts);

/// Loads the checkpoint at `path` (a step directory, or a root whose `latest` names one) into
/// `parts` (in place: weights, optimizer moments and step counts) and restores the RNG states.
/// Errors: missing files, another version, a part or tensor of another shape or name (nothing
/// is changed for that part then); the error names the tensor and both shapes.
result<checkpoint_cursor> load_checkpoint(const std::string& path, const std::vector<checkpoint_part>& parts);

}  // namespace caf_agent::learner
