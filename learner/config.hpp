#pragma once
/// learner/config.hpp: [learner], the data-parallel learner shards and their hyperparameters
/// (defaults, the field list that runtime/ reads TOML through and prints config/defaults.toml
/// from, checks). No torch types: runtime/ includes it without LibTorch.

#include <cstdint>
#include <string>

#include "base/config_fields.hpp"
#include "base/named_enum.hpp"

namespace caf_agent::learner {

/// The c10d backend of a process group ([learner] backend holds its name).
enum class dp_backend : uint8_t {
  gloo,  ///< CPU tensors, TCP.
  nccl,  ///< CUDA tensors, NVLink / InfiniBand; one GPU per rank (rank modulo device count).
};
CAF_AGENT_ENUM_NAMES(dp_backend, "gloo", "nccl")

/// The dtype a shard's forward and backward passes compute in ([learner] compute_dtype); the
/// master weights and the optimizer stay float32.
enum class compute_dtype_kind : uint8_t { float32, bfloat16 };
CAF_AGENT_ENUM_NAMES(compute_dtype_kind, "float32", "bfloat16")

/// How new weights reach the policy services ([learner] weight_sync): `automatic` ("auto")
/// hands tensors to an engine in the learner's process and a checkpoint to the others; `disk`
/// always goes through the checkpoint.
enum class weight_sync_mode : uint8_t { automatic, disk };
CAF_AGENT_ENUM_NAMES(weight_sync_mode, "auto", "disk")

/// [learner]: what each member means is said once, in fields().
struct learner_config {
  std::string model_dir;
  int32_t shards = 1;
  dp_backend backend = dp_backend::gloo;
  std::string device = "cpu";
  std::string master_addr = "127.0.0.1";
  /// Shard 0's rendezvous store listens on master_port + generation % 16: a shard that comes
  /// back while an abandoned step of its previous incarnation still holds the old port finds
  /// a free one. Rationale: 16 ports outlast every abandoned step a run sees in a row.
  int32_t master_port = 29500;
  /// 0: the cores / shards when shards > 1 (shards of one host share its cores; spinning
  /// threads would starve each other's messaging).
  int32_t cpu_threads = 0;
  /// Rationale: a dead peer is seen at once by gloo; this bounds a hung one, and must exceed
  /// the slowest shard's step.
  int64_t timeout_ms = 600000;
  double actor_lr = 3e-6;   ///< the paper's
  double critic_lr = 6e-6;  ///< the paper's
  // Rationale: clip-higher (DAPO-style) keeps low-probability tokens explorable.
  double clip_low = 0.2;
  double clip_high = 0.28;
  double gamma = 1.0;
  double gae_lambda = 0.95;
  int32_t ppo_epochs = 1;
  int64_t max_tokens_per_microbatch = 0;
  double entropy_coef = 0.0;
  bool normalize_advantages = false;
  double max_grad_norm = 1.0;
  compute_dtype_kind compute_dtype = compute_dtype_kind::float32;
  bool checkpoint_layers = false;
  weight_sync_mode weight_sync = weight_sync_mode::automatic;
  int32_t weight_sync_bucket_mb = 64;
  int32_t rank = 0;  ///< this shard (`--shard R`; not a TOML key)

  /// The field list (base/config_fields.hpp).
  template <class F, class Self>
  static void fields(F& f, Self& c) {
    using namespace base;
    f("model_dir", c.model_dir, "base model of actor and critic; empty: policy.model_dir");
    // Rationale for the bound: one shard per GPU; 4096 is far beyond any cluster this runs on.
    f("shards", c.shards, "data-parallel shards the trainer waits for (one `--role learner` process each)", positive(),
      range(1, 4096));
    f("backend", c.backend, "gloo (CPU tensors) or nccl (one GPU per shard)");
    f("device", c.device, "cpu, cuda, cuda:N (nccl: cuda:<rank % GPUs>)");
    f("master_addr", c.master_addr, "shard 0 serves the rendezvous store here", not_empty());
    f("master_port", c.master_port, "rendezvous port (and the next 15: a new port after a shard was lost)",
      within(1, 65535 - 15, "must be in 1..65520 (it uses 16 ports)"));
    f("cpu_threads", c.cpu_threads, "torch threads of a CPU shard; 0: cores / shards",
      at_least(0, "must be >= 0 (0: cores / shards)"));
    f("timeout_ms", c.timeout_ms, "rendezvous and collective timeout (a hung peer fails the step after this)",
      positive());
    f("actor_lr", c.actor_lr, "the actor's learning rate", above(0, "must be > 0"));
    f("critic_lr", c.critic_lr, "the critic's learning rate", above(0, "must be > 0"));
    f("clip_low", c.clip_low, "PPO clip-higher: 1 - clip_low ...");
    f("clip_high", c.clip_high, "... 1 + clip_high");
    f("gamma", c.gamma, "GAE discount", within(0, 1, "must be in [0, 1]"));
    f("gae_lambda", c.gae_lambda, "GAE lambda", within(0, 1, "must be in [0, 1]"));
    f("ppo_epochs", c.ppo_epochs, "updates per PPO step over the same batch", positive());
    f("max_tokens_per_microbatch", c.max_tokens_per_microbatch,
      "token budget of one micro-batch; 0: a shard's whole batch at once",
      at_least(0, "must be >= 0 (0: the whole batch)"));
    f("entropy_coef", c.entropy_coef, "entropy bonus in the actor loss", at_least(0, "must be >= 0"));
    f("normalize_advantages", c.normalize_advantages, "whiten advantages over the global batch");
    f("max_grad_norm", c.max_grad_norm, "global gradient-norm clip; <= 0: off");
    f("compute_dtype", c.compute_dtype, "float32, or bfloat16 over fp32 master weights");
    f("checkpoint_layers", c.checkpoint_layers, "per-layer activation recomputation");
    f("weight_sync", c.weight_sync,
      "auto: tensors to an engine in this process, checkpoint + reload for others; disk: always the checkpoint");
    f("weight_sync_bucket_mb", c.weight_sync_bucket_mb,
      "in-process hand-off copies the tensors in buckets of this size", positive());
  }

  /// Rules between fields.
  void validate(base::config_errors& e) const {
    if (device != "cpu" && device != "cuda" && device.rfind("cuda:", 0) != 0)
      e.error("device", "must be cpu, cuda or cuda:N, got '" + device + "'");
    if (backend == dp_backend::gloo && device != "cpu")
      e.error("backend", "gloo trains CPU tensors: set device = \"cpu\" or backend = \"nccl\"");
    if (backend == dp_backend::nccl && device == "cpu") e.error("backend", "nccl needs device = \"cuda\"");
    // As ppo_policy_loss requires, so that a run is refused at start, not at its first update.
    if (!(clip_low > 0 && clip_low < 1)) e.error("clip_low", "must be in (0, 1)");
    if (!(clip_high >= clip_low)) e.error("clip_high", "must be >= learner.clip_low");
  }
};

}  // namespace caf_agent::learner
