// learner/shard_session.cpp: see shard_session.hpp.
#include "learner/shard_session.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>

#include "base/remove_tree.hpp"
#include "learner/checkpoint.hpp"
#include "learner/data_parallel.hpp"
#include "learner/trainer.hpp"
#include "policy/model/weight_exchange.hpp"

namespace caf_agent::learner {
namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

std::string device_of(const shard_options& o) {
  if (o.device != "cuda") return o.device;
  const auto gpus = static_cast<int64_t>(torch::cuda::device_count());
  return "cuda:" + std::to_string(gpus > 0 ? o.rank % gpus : 0);
}

trainer_options trainer_options_of(const shard_options& o) {
  trainer_options t;
  t.forward.compute_dtype = o.compute_dtype == compute_dtype_kind::bfloat16 ? torch::kBFloat16 : torch::kFloat32;
  t.forward.checkpoint_layers = o.checkpoint_layers;
  t.forward.temperature = o.temperature;
  t.actor_optimizer.lr = o.actor_lr;
  t.actor_optimizer.max_grad_norm = o.max_grad_norm;
  t.critic_optimizer.lr = o.critic_lr;
  t.critic_optimizer.max_grad_norm = o.max_grad_norm;
  t.ppo.clip_low = o.clip_low;
  t.ppo.clip_high = o.clip_high;
  t.gae.gamma = o.gamma;
  t.gae.lambda = o.gae_lambda;
  t.ppo_epochs = o.ppo_epochs;
  t.max_tokens_per_microbatch = o.max_tokens_per_microbatch;
  t.entropy_coef = o.entropy_coef;
  t.normalize_advantages = o.normalize_advantages;
  return t;
}

result<rollout_batch> to_batch(const shard_batch& b) {
  const auto n = static_cast<int64_t>(b.tokens.size());
  if (b.loss_mask.size() != b.tokens.size() || b.sampler_logp.size() != b.tokens.size())
    return fail("batch: tokens, loss_mask and sampler_logp differ in length");
  rollout_batch out;
  out.tokens_t = torch::from_blob(const_cast<int32_t*>(b.tokens.data()), {n}, torch::kInt32).to(torch::kInt64);
  out.seq_offsets_n1 = torch::tensor(b.seq_offsets, torch::kInt64);
  out.loss_mask_t = torch::from_blob(const_cast<uint8_t*>(b.loss_mask.data()), {n}, torch::kUInt8).to(torch::kFloat32);
  out.sampler_logp_t = torch::from_blob(const_cast<float*>(b.sampler_logp.data()), {n}, torch::kFloat32).clone();
  out.rewards_n = torch::tensor(b.rewards, torch::kFloat32);
  if (auto ok = out.validate(); !ok) return ok.error();
  return out;
}

/// The plan must be the one made for this shard under its own settings: a trainer and a shard
/// that read different [learner] settings would train different steps (or wait on each other).
status check_plan(const shard_batch& b, const shard_options& o, size_t optimizer_steps) {
  if (b.rank != o.rank || b.shards != o.shards)
    return fail("the batch was planned for shard " + std::to_string(b.rank) + " of " + std::to_string(b.shards) +
                "; this is shard " + std::to_string(o.rank) + " of learner.shards = " + std::to_string(o.shards));
  if (b.max_tokens_per_microbatch != o.max_tokens_per_microbatch)
    return fail("the trainer planned the batch with learner.max_tokens_per_microbatch = " +
                std::to_string(b.max_tokens_per_microbatch) + "; this shard has " +
                std::to_string(o.max_tokens_per_microbatch) + " (every node must read the same [learner] settings)");
  if (b.steps.size() != optimizer_steps)
    return fail("the batch plans " + std::to_string(b.steps.size()) + " optimizer steps for " +
                std::to_string(optimizer_steps) + " learning rates");
  return {};
}

/// The base model's tokenizer and chat template beside the actor's weights, so a checkpoint's
/// actor/ is a model directory an engine serves (`./x eval --checkpoint`).
status copy_tokenizer_files(const std::string& model_dir, const fs::path& actor_dir) {
  // Rationale: the files a Hugging Face checkpoint's tokenizer and chat template live in.
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                           "merges.txt", "generation_config.json", "chat_template.jinja"}) {
    const auto from = fs::path(model_dir) / name;
    std::error_code ec;
    if (!fs::is_regular_file(from, ec) || fs::exists(actor_dir / name, ec)) continue;
    fs::copy_file(from, actor_dir / name, ec);
    if (ec) return fail("cannot copy " + from.string() + " into " + actor_dir.string() + ": " + ec.message());
  }
  return {};
}

}  // namespace

struct shard_session::impl {
  shard_options options;
  trainer_options train;
  std::unique_ptr<process_group> group;
  uint64_t group_generation = 0;
  std::optional<trainer> model;
  uint64_t version = 0;
  bool dirty = true;  // no model yet, or a failed step: load the base version first

  status join(uint64_t generation) {
    if (options.shards <= 1 || (group && group_generation == generation)) return {};
    group.reset();  // the old group is poisoned or belongs to a lost shard set
    process_group_options g;
    g.rank = options.rank;
    g.world_size = options.shards;
    g.master_addr = options.master_addr;
    g.master_port = static_cast<uint16_t>(options.master_port + static_cast<int32_t>(generation % 16));
    g.timeout = std::chrono::milliseconds(options.timeout_ms);
    g.backend = options.backend;
    auto created = process_group::create(g);
    if (!created)
      return fail("rendezvous of generation " + std::to_string(generation) + ": " + created.error().message);
    group = std::move(created.value());
    group_generation = generation;
    return {};
  }

  status load(uint64_t base_version, const std::string& base_checkpoint) {
    model.reset();
    const torch::Device device(device_of(options));
    auto actor = policy::decoder::load(options.model_dir, device, torch::kFloat32, policy::value_head_mode::none);
    if (!actor) return fail("actor: " + actor.error().message);
    auto critic =
        policy::decoder::load(options.model_dir, device, torch::kFloat32, policy::value_head_mode::init_if_missing);
    if (!critic) return fail("critic: " + critic.error().message);
    for (auto* m : {&actor.value(), &critic.value()})
      for (const auto& [name, p] : m->named_parameters()) p.requires_grad_(true);
    auto t = trainer::create(std::move(actor.value()), std::move(critic.value()), train);
    if (!t) return t.error();
    model.emplace(std::move(t.value()));
    if (base_version > 0) {
      if (base_checkpoint.empty())
        return fail("version " + std::to_string(base_version) + " has no checkpoint to load");
      auto cursor = load_checkpoint(base_checkpoint, model->checkpoint_parts());
      if (!cursor) return fail("loading version " + std::to_string(base_version) + ": " + cursor.error().message);
      model->set_steps(cursor.value().step);
    }
    version = base_version;
    return {};
  }
};

shard_session::shard_session(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
shard_session::~shard_session() = default;

bool shard_session::backend_available(dp_backend backend) {
  return process_group::backend_available(backend);
}

result<std::unique_ptr<shard_session>> shard_session::create(const shard_options& options) {
  if (options.model_dir.empty()) return fail("learner: no model to train (learner.model_dir or policy.model_dir)");
  if (options.rank < 0 || options.rank >= options.shards)
    return fail("learner: shard rank " + std::to_string(options.rank) + " is outside 0.." +
                std::to_string(options.shards - 1));
  if (options.shards > 1 && !backend_available(options.backend))
    return fail("learner: this build has no " + to_string(options.backend) + " process group (see learner/README.md)");
  if (options.device == "cpu" && (options.cpu_threads > 0 || options.shards > 1)) {
    const auto cores = static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
    at::set_num_threads(
        static_cast<int>(options.cpu_threads > 0 ? options.cpu_threads : std::max<int64_t>(1, cores / options.shards)));
  }
  auto state = std::make_unique<impl>();
  state->options = options;
  state->train = trainer_options_of(options);
  return std::unique_ptr<shard_session>(new shard_session(std::move(state)));
}

uint64_t shard_session::version() const {
  return impl_->version;
}

result<shard_step_outcome> shard_session::run(const shard_batch& batch, const shard_step& step) {
  auto& s = *impl_;
  shard_step_outcome out;
  const auto start = clock_type::now();
  auto failed = [&](std::string why) -> result<shard_step_outcome> {
    s.dirty = true;
    s.group.reset();
    return fail(std::move(why));
  };
  try {
    if (auto ok = s.join(step.generation); !ok) return failed(ok.error().message);
    if (s.dirty || !s.model || s.version != step.base_version) {
      if (auto ok = s.load(step.base_version, step.base_checkpoint); !ok) return failed(ok.error().message);
      out.reloaded = true;
    }
    s.dirty = false;
    out.prepare_seconds = since(start);
    auto b = to_batch(batch);
    if (!b) return failed(b.error().message);
    auto stage = parse_stage(batch.stage);
    if (!stage) return failed(stage.error().message);
    s.model->options().group = s.group.get();
    s.model->set_temperature(batch.temperature > 0 ? batch.temperature : s.options.temperature);
    const auto step_start = clock_type::now();
    const std::vector<double> lrs = batch.actor_lrs.empty() ? std::vector<double>{s.options.actor_lr} : batch.actor_lrs;
    if (auto ok = check_plan(batch, s.options, lrs.size()); !ok) return failed(ok.error().message);
    result<step_report> report = fail("no step ran");
    double nll_sum = 0;
    for (size_t i = 0; i < lrs.size(); ++i) {
      s.model->set_actor_lr(lrs[i]);
      report = s.model->step(b.value(), stage.value(), batch.steps[i]);
      if (!report) return failed(report.error().message);
      nll_sum += report.value().nll;
    }
    out.optimizer_steps = static_cast<int64_t>(lrs.size());
    out.nll_mean = nll_sum / double(lrs.size());
    out.step_seconds = since(step_start);
    const auto& r = report.value();
    out.applied = r.applied;
    out.skip_reason = r.skip_reason;
    out.report_json = r.to_json();
    out.policy_loss = r.policy_loss;
    out.value_loss = r.value_loss;
    out.explained_variance = r.explained_variance;
    out.entropy = r.entropy;
    out.nll = r.nll;
    out.sampled_tokens = r.sampled_tokens;
    s.version = step.new_version;
    if (s.options.rank == 0 && step.save_checkpoint) {
      const auto save_start = clock_type::now();
      char name[32];
      std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step.new_version));
      const auto dir = fs::path(s.options.checkpoint_root) / name;
      base::remove_tree(dir.string());  // left by an earlier attempt whose step was never acknowledged
      auto saved = save_checkpoint(s.options.checkpoint_root, {static_cast<int64_t>(step.new_version), 0},
                                   s.model->checkpoint_parts());
      if (!saved) return failed("checkpoint: " + saved.error().message);
      out.checkpoint = saved.value();
      if (auto ok = copy_tokenizer_files(s.options.model_dir, fs::path(out.checkpoint) / "actor"); !ok)
        return failed("checkpoint: " + ok.error().message);
      out.save_seconds = since(save_start);
    }
    if (s.options.rank == 0 && step.stage_in_process) {
      const auto stage_start = clock_type::now();
      const auto key = "v" + std::to_string(step.new_version);
      const int64_t bucket_bytes = int64_t{s.options.weight_sync_bucket_mb} << 20;
      policy::stage_in_process_weights(key, s.model->actor().named_parameters(), bucket_bytes);
      out.in_process_path = std::string(policy::in_process_weights_prefix) + key;
      out.stage_seconds = since(stage_start);
    }
  } catch (const c10::Error& e) {
    return failed(std::string("learner step: ") + e.what_without_backtrace());
  }
  return out;
}

}  // namespace caf_agent::learner
