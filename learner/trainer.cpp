// Shape legend: see trainer.hpp.
#include "learner/trainer.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "learner/aggregation.hpp"
#include "learner/data_parallel.hpp"

namespace caf_agent::learner {
namespace {

/// One micro-batch with what the PPO step computes for it before the update.
struct prepared {
  rollout_batch b;
  torch::Tensor old_logp_t, old_values_t, advantages_t, returns_t;
};

rollout_batch to_device(const rollout_batch& b, torch::Device device) {
  rollout_batch out = b;
  out.tokens_t = b.tokens_t.to(device);
  out.loss_mask_t = b.loss_mask_t.to(device, torch::kFloat32);
  if (b.sampler_logp_t.defined()) out.sampler_logp_t = b.sampler_logp_t.to(device, torch::kFloat32);
  out.rewards_n = b.rewards_n.to(device, torch::kFloat32);
  out.seq_offsets_n1 = b.seq_offsets_n1.to(torch::kCPU);
  return out;
}

torch::Tensor cat_all(const std::vector<prepared>& mbs, torch::Tensor prepared::*field) {
  std::vector<torch::Tensor> parts;
  for (const auto& m : mbs) parts.push_back(m.*field);
  return torch::cat(parts);
}

torch::Tensor cat_masks(const std::vector<prepared>& mbs) {
  std::vector<torch::Tensor> parts;
  for (const auto& m : mbs) parts.push_back(m.b.loss_mask_t);
  return torch::cat(parts);
}

double masked_mean(const torch::Tensor& x_t, const torch::Tensor& mask_t) {
  return ((x_t.detach() * mask_t).sum() / mask_t.sum().clamp_min(1)).item<double>();
}

const char* stage_name(train_stage s) {
  return s == train_stage::ppo ? "ppo" : s == train_stage::rft ? "rft" : "vp";
}

}  // namespace

result<train_stage> parse_stage(const std::string& name) {
  if (name == "ppo") return train_stage::ppo;
  if (name == "rft") return train_stage::rft;
  if (name == "vp" || name == "value_pretrain") return train_stage::value_pretrain;
  return fail("unknown training stage '" + name + "' (ppo, rft, vp)");
}

status rollout_batch::validate() const {
  if (!tokens_t.defined() || tokens_t.dim() != 1 || tokens_t.scalar_type() != torch::kInt64)
    return fail("batch: tokens must be int64 [t]");
  if (auto ok = check_offsets(seq_offsets_n1, tokens_t.size(0), "batch"); !ok) return ok;
  if (!loss_mask_t.defined() || loss_mask_t.sizes() != tokens_t.sizes())
    return fail("batch: loss_mask must have one entry per token");
  if (sampler_logp_t.defined() && sampler_logp_t.sizes() != tokens_t.sizes())
    return fail("batch: sampler_logp must have one entry per token");
  if (!rewards_n.defined() || rewards_n.dim() != 1 || rewards_n.size(0) != sequences())
    return fail("batch: rewards must have one entry per trajectory");
  return {};
}

rollout_batch rollout_batch::select(const std::vector<int64_t>& indices) const {
  auto off = seq_offsets_n1.to(torch::kCPU).contiguous();
  const int64_t* o = off.data_ptr<int64_t>();
  std::vector<torch::Tensor> tok, mask, samp;
  std::vector<int64_t> offsets{0};
  for (int64_t i : indices) {
    const int64_t len = o[i + 1] - o[i];
    tok.push_back(tokens_t.narrow(0, o[i], len));
    mask.push_back(loss_mask_t.narrow(0, o[i], len));
    if (sampler_logp_t.defined()) samp.push_back(sampler_logp_t.narrow(0, o[i], len));
    offsets.push_back(offsets.back() + len);
  }
  if (indices.empty()) {  // torch::cat needs one part: an empty one of each
    tok.push_back(tokens_t.narrow(0, 0, 0));
    mask.push_back(loss_mask_t.narrow(0, 0, 0));
    if (sampler_logp_t.defined()) samp.push_back(sampler_logp_t.narrow(0, 0, 0));
  }
  rollout_batch out;
  out.tokens_t = torch::cat(tok);
  out.loss_mask_t = torch::cat(mask);
  if (sampler_logp_t.defined()) out.sampler_logp_t = torch::cat(samp);
  out.seq_offsets_n1 = torch::tensor(offsets, torch::kInt64);
  out.rewards_n = rewards_n.index_select(0, torch::tensor(indices, torch::kInt64).to(rewards_n.device()));
  return out;
}

trainer::trainer(policy::decoder actor, std::optional<policy::decoder> critic, adamw actor_opt,
                 std::optional<adamw> critic_opt, const trainer_options& options)
    : actor_(std::move(actor)),
      critic_(std::move(critic)),
      actor_opt_(std::move(actor_opt)),
      critic_opt_(std::move(critic_opt)),
      options_(options) {}

result<trainer> trainer::create(policy::decoder actor, std::optional<policy::decoder> critic,
                                const trainer_options& options) {
  if (options.ppo_epochs < 1) return fail("trainer: ppo_epochs must be >= 1");
  if (options.max_tokens_per_microbatch < 0) return fail("trainer: max_tokens_per_microbatch must be >= 0");
  auto actor_opt = adamw::create(actor.named_parameters(), options.actor_optimizer);
  if (!actor_opt) return fail("actor: " + actor_opt.error().message);
  std::optional<adamw> critic_opt;
  if (critic) {
    if (!critic->has_value_head()) return fail("trainer: the critic has no value head");
    // Rationale: the critic never uses the LM head; AdamW's decay would still move it.
    auto params = critic->named_parameters();
    params.erase("lm_head.weight");
    auto opt = adamw::create(params, options.critic_optimizer);
    if (!opt) return fail("critic: " + opt.error().message);
    critic_opt = std::move(opt.value());
  }
  return trainer(std::move(actor), std::move(critic), std::move(actor_opt.value()), std::move(critic_opt), options);
}

std::vector<checkpoint_part> trainer::checkpoint_parts() {
  std::vector<checkpoint_part> parts{{"actor", &actor_, &actor_opt_}};
  if (critic_) parts.push_back({"critic", &*critic_, &*critic_opt_});
  return parts;
}

std::vector<rollout_batch> trainer::microbatches(const rollout_batch& batch, const step_plan& plan,
                                                 step_report& report) const {
  std::vector<rollout_batch> out;
  for (const auto& mb : plan.microbatches) out.push_back(to_device(batch.select(mb), actor_.device()));
  report.microbatches = static_cast<int64_t>(out.size());
  return out;
}

bool trainer::data_parallel() const {
  return options_.group != nullptr && options_.group->world_size() > 1;
}

result<aggregation> trainer::global_agg(aggregation agg, const std::vector<rollout_batch>& mbs) {
  double count = 0;
  for (const auto& m : mbs) count += aggregation_count(m.loss_mask_t, m.seq_offsets_n1, agg.mode);
  if (data_parallel()) {
    std::vector<torch::Tensor> t{torch::full({1}, count, torch::dtype(torch::kFloat64).device(actor_.device()))};
    if (auto ok = options_.group->all_reduce(t, reduce_op::sum); !ok) return ok.error();
    count = t[0].item<double>();
  }
  agg.denominator = count;
  return agg;
}

result<bool> trainer::sync_before_step(bool local_skip, bool actor, bool critic) {
  if (!data_parallel()) return local_skip;
  std::vector<torch::Tensor> flag{
      torch::full({1}, local_skip ? 1.0 : 0.0, torch::dtype(torch::kFloat32).device(actor_.device()))};
  if (auto ok = options_.group->all_reduce(flag, reduce_op::max); !ok) return ok.error();
  if (flag[0].item<double>() > 0) return true;
  // One flat gradient per model (a shard without micro-batches, or a parameter its batch never
  // reached, adds zeros); the optimizer's step then reads the reduced sum in place.
  std::vector<torch::Tensor> grads;
  if (actor) grads.push_back(actor_opt_.flat()->grad_p());
  if (critic) grads.push_back(critic_opt_->flat()->grad_p());
  if (auto ok = options_.group->all_reduce(grads, reduce_op::sum); !ok) return ok.error();
  return false;
}

result<policy::decoder> trainer::compute_model(bool critic) {
  policy::decoder& master = critic ? *critic_ : actor_;
  const torch::ScalarType dtype = options_.forward.compute_dtype;
  if (dtype == torch::kFloat32) return master;
  auto& copy = critic ? critic_copy_ : actor_copy_;
  if (!copy || copy->dtype() != dtype) {
    copy.reset();  // the old copy's buffers go before the new ones are allocated
    auto made = compute_copy::create(master, (critic ? *critic_opt_ : actor_opt_).flat(), dtype);
    if (!made) return made.error();
    copy.emplace(std::move(made.value()));
  }
  return copy->for_forward();
}

result<step_report> trainer::step(const rollout_batch& batch, train_stage stage) {
  if (auto ok = batch.validate(); !ok) return ok.error();
  auto off = batch.seq_offsets_n1.to(torch::kCPU).contiguous();
  auto mask = batch.loss_mask_t.to(torch::kCPU, torch::kFloat64).contiguous();
  auto rewards = batch.rewards_n.to(torch::kCPU, torch::kFloat64).contiguous();
  const int64_t* o = off.data_ptr<int64_t>();
  const double* m = mask.data_ptr<double>();
  std::vector<int64_t> lengths, sampled;
  std::vector<double> reward(rewards.data_ptr<double>(), rewards.data_ptr<double>() + batch.sequences());
  for (int64_t i = 0; i < batch.sequences(); ++i) {
    lengths.push_back(o[i + 1] - o[i]);
    sampled.push_back(static_cast<int64_t>(std::accumulate(m + o[i], m + o[i + 1], 0.0)));
  }
  const bool dp = data_parallel();
  batch_plan_options plan;
  plan.max_tokens_per_microbatch = options_.max_tokens_per_microbatch;
  plan.shards = dp ? options_.group->world_size() : 1;
  auto slices = plan_batch(lengths, sampled, reward, plan);
  if (!slices) return slices.error();
  const auto& mine = slices.value().at(dp ? static_cast<size_t>(options_.group->rank()) : 0);
  return step(batch.select(mine.sequences), stage, mine.steps.at(0));
}

result<step_report> trainer::step(const rollout_batch& batch, train_stage stage, const step_plan& plan) {
  const auto start = std::chrono::steady_clock::now();
  if (auto ok = batch.validate(); !ok) return ok.error();
  if ((stage == train_stage::ppo || stage == train_stage::value_pretrain) && !critic_)
    return fail(std::string("trainer: stage ") + stage_name(stage) + " needs a critic");
  for (const auto& mb : plan.microbatches)
    for (const int64_t i : mb)
      if (i < 0 || i >= batch.sequences())
        return fail("step plan: a micro-batch names trajectory " + std::to_string(i) + " of a batch of " +
                    std::to_string(batch.sequences()));
  step_report report;
  report.stage = stage_name(stage);
  report.actor_lr = options_.actor_optimizer.lr;
  report.sequences = plan.sequences;
  report.tokens = plan.tokens;
  report.sampled_tokens = plan.sampled_tokens;
  report.reward_mean = plan.sequences > 0 ? plan.reward_sum / double(plan.sequences) : 0.0;
  if (report.sampled_tokens == 0) {
    report.skip_reason = "the batch has no sampled token (all masked)";
  } else if (!plan.skip_reason.empty()) {
    report.skip_reason = plan.skip_reason;  // every shard has it: no collective is left waiting
  } else {
    try {
      status ok = stage == train_stage::ppo   ? ppo_step(batch, plan, report)
                  : stage == train_stage::rft ? rft_step(batch, plan, report)
                                              : vp_step(batch, plan, report);
      if (!ok) {  // nothing half-accumulated may leak into the next step
        actor_opt_.zero_grad();
        if (critic_opt_) critic_opt_->zero_grad();
        return ok.error();
      }
    } catch (const c10::Error& e) {
      actor_opt_.zero_grad();
      if (critic_opt_) critic_opt_->zero_grad();
      return fail(std::string("trainer step: ") + e.what_without_backtrace());
    }
  }
  report.applied = report.skip_reason.empty();
  if (report.applied) ++steps_;
  if (actor_.device().is_cuda()) torch::cuda::synchronize();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.update_seconds = std::max(report.seconds - report.old_logprob_seconds, 0.0);
  return report;
}

status trainer::ppo_step(const rollout_batch& batch, const step_plan& plan, step_report& report) {
  auto mbs_in = microbatches(batch, plan, report);
  if (!report.skip_reason.empty() || (mbs_in.empty() && !data_parallel())) return {};
  std::vector<prepared> mbs;
  const auto recompute_start = std::chrono::steady_clock::now();
  {  // Old log-probabilities and values by the trainer, before the update.
    torch::NoGradGuard no_grad;
    train_forward_options lp = options_.forward, val = options_.forward;
    lp.want_entropy = false;
    val.want_logprobs = false;
    val.want_values = true;
    auto actor = compute_model(false);
    if (!actor) return actor.error();
    auto critic = compute_model(true);
    if (!critic) return critic.error();
    for (auto& b : mbs_in) {
      auto a = train_forward(actor.value(), b.tokens_t, b.seq_offsets_n1, lp);
      if (!a) return a.error();
      auto v = train_forward(critic.value(), b.tokens_t, b.seq_offsets_n1, val);
      if (!v) return v.error();
      auto g = gae_packed(v.value().values_t, b.rewards_n, b.loss_mask_t, b.seq_offsets_n1, options_.gae);
      if (!g) return g.error();
      mbs.push_back({b, a.value().logp_t, v.value().values_t, g.value().advantages_t, g.value().returns_t});
    }
    // Rationale: CUDA work is queued; without the wait the clock would stop before it ran.
    if (actor_.device().is_cuda()) torch::cuda::synchronize();
  }
  report.old_logprob_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - recompute_start).count();
  if (!mbs.empty()) {  // statistics of this shard's share
    auto mask_t = cat_masks(mbs);
    if (batch.sampler_logp_t.defined()) {
      std::vector<torch::Tensor> s;
      for (const auto& m : mbs) s.push_back(m.b.sampler_logp_t);
      auto mm =
          mismatch_stats(torch::cat(s), cat_all(mbs, &prepared::old_logp_t), mask_t, options_.ppo.mask_ratio_band);
      if (!mm) return mm.error();
      report.mismatch = mm.value();
    }
    auto ev = explained_variance(cat_all(mbs, &prepared::old_values_t), cat_all(mbs, &prepared::returns_t), mask_t);
    report.explained_variance = ev ? ev.value() : 0.0;
  }
  {                              // The advantages' mean (and whitening) over the global batch's sampled tokens.
    double sums[3] = {0, 0, 0};  // sum, sum of squares, count
    for (const auto& m : mbs) {
      auto adv = m.advantages_t.detach().to(torch::kFloat64) * m.b.loss_mask_t;
      sums[0] += adv.sum().item<double>();
      sums[1] += (adv * adv).sum().item<double>();
      sums[2] += m.b.loss_mask_t.sum().item<double>();
    }
    if (data_parallel()) {
      std::vector<torch::Tensor> t{torch::tensor({sums[0], sums[1], sums[2]}, torch::kFloat64).to(actor_.device())};
      if (auto ok = options_.group->all_reduce(t, reduce_op::sum); !ok) return ok.error();
      auto host = t[0].cpu();
      for (int i = 0; i < 3; ++i) sums[i] = host[i].item<double>();
    }
    const double n = std::max(sums[2], 1.0);
    report.advantage_mean = sums[0] / n;
    if (options_.normalize_advantages) {
      const double mean = report.advantage_mean;
      const double var = std::max(sums[1] / n - mean * mean, 0.0);
      // Rationale: 1e-8 keeps a batch of identical advantages from dividing by zero.
      for (auto& m : mbs) m.advantages_t = (m.advantages_t - mean) / std::sqrt(var + 1e-8) * m.b.loss_mask_t;
    }
  }
  ppo_options ppo = options_.ppo;
  auto pagg = global_agg(ppo.agg, mbs_in);
  if (!pagg) return pagg.error();
  ppo.agg = pagg.value();
  value_loss_options vopt = options_.value;
  auto vagg = global_agg(vopt.agg, mbs_in);
  if (!vagg) return vagg.error();
  vopt.agg = vagg.value();
  train_forward_options actor_fwd = options_.forward, critic_fwd = options_.forward;
  actor_fwd.want_entropy = true;  // reported every step
  critic_fwd.want_logprobs = false;
  critic_fwd.want_values = true;
  for (int64_t epoch = 0; epoch < options_.ppo_epochs; ++epoch) {
    double policy_loss = 0, value_loss_sum = 0, entropy_sum = 0, sampled = 0;
    bool bad = false;
    for (auto& m : mbs) {
      auto actor = compute_model(false);
      if (!actor) return actor.error();
      auto f = train_forward(actor.value(), m.b.tokens_t, m.b.seq_offsets_n1, actor_fwd);
      if (!f) return f.error();
      auto loss = ppo_policy_loss(
          {f.value().logp_t, m.old_logp_t, m.advantages_t, m.b.loss_mask_t, m.b.seq_offsets_n1, m.b.sampler_logp_t},
          ppo);
      if (!loss) return loss.error();
      auto total = loss.value().loss;
      if (options_.entropy_coef != 0) {
        auto ent = entropy_mean(f.value().entropy_t, m.b.loss_mask_t, m.b.seq_offsets_n1, ppo.agg);
        if (!ent) return ent.error();
        total = total - options_.entropy_coef * ent.value();
      }
      auto critic = compute_model(true);
      if (!critic) return critic.error();
      auto v = train_forward(critic.value(), m.b.tokens_t, m.b.seq_offsets_n1, critic_fwd);
      if (!v) return v.error();
      auto vl = value_loss(v.value().values_t, m.old_values_t, m.returns_t, m.b.loss_mask_t, m.b.seq_offsets_n1, vopt);
      if (!vl) return vl.error();
      if (!all_finite({total, vl.value().loss})) {
        bad = true;
        break;
      }
      total.backward();
      vl.value().loss.backward();
      policy_loss += total.item<double>();
      value_loss_sum += vl.value().loss.item<double>();
      const double n = m.b.loss_mask_t.sum().item<double>();
      entropy_sum += masked_mean(f.value().entropy_t, m.b.loss_mask_t) * n;
      sampled += n;
      report.ppo = loss.value();
    }
    auto skip = sync_before_step(bad, true, true);
    if (!skip) return skip.error();
    if (skip.value()) {
      report.skip_reason = bad ? "non-finite loss" : "non-finite loss on another shard";
      actor_opt_.zero_grad();
      critic_opt_->zero_grad();
      return {};
    }
    report.policy_loss = policy_loss;
    report.value_loss = value_loss_sum;
    if (epoch == 0) report.entropy = entropy_sum / std::max(sampled, 1.0);
    report.actor_step = actor_opt_.step();
    report.critic_step = critic_opt_->step();
    if (!report.actor_step.applied) report.skip_reason = "actor: " + report.actor_step.skip_reason;
    if (!report.critic_step.applied)
      report.skip_reason += (report.skip_reason.empty() ? "critic: " : "; critic: ") + report.critic_step.skip_reason;
    if (!report.skip_reason.empty()) return {};
  }
  return {};
}

status trainer::rft_step(const rollout_batch& batch, const step_plan& plan, step_report& report) {
  auto mbs = microbatches(batch, plan, report);
  if (!report.skip_reason.empty() || (mbs.empty() && !data_parallel())) return {};
  auto agg = global_agg(options_.ppo.agg, mbs);
  if (!agg) return agg.error();
  train_forward_options fwd = options_.forward;
  fwd.want_entropy = false;
  double loss_sum = 0, nll_sum = 0, sampled = 0;
  bool bad = false;
  for (auto& b : mbs) {
    auto actor = compute_model(false);
    if (!actor) return actor.error();
    auto f = train_forward(actor.value(), b.tokens_t, b.seq_offsets_n1, fwd);
    if (!f) return f.error();
    auto nll = rft_nll(f.value().logp_t, b.loss_mask_t, b.seq_offsets_n1, agg.value());
    if (!nll) return nll.error();
    if (!all_finite({nll.value().loss})) {
      bad = true;
      break;
    }
    nll.value().loss.backward();
    loss_sum += nll.value().loss.item<double>();
    nll_sum += nll.value().nll_token_mean * static_cast<double>(nll.value().tokens);
    sampled += static_cast<double>(nll.value().tokens);
  }
  auto skip = sync_before_step(bad, true, false);
  if (!skip) return skip.error();
  if (skip.value()) {
    report.skip_reason = bad ? "non-finite loss" : "non-finite loss on another shard";
    actor_opt_.zero_grad();
    return {};
  }
  report.policy_loss = loss_sum;
  report.nll = nll_sum / std::max(sampled, 1.0);
  report.actor_step = actor_opt_.step();
  if (!report.actor_step.applied) report.skip_reason = "actor: " + report.actor_step.skip_reason;
  return {};
}

status trainer::vp_step(const rollout_batch& batch, const step_plan& plan, step_report& report) {
  auto mbs = microbatches(batch, plan, report);
  if (!report.skip_reason.empty() || (mbs.empty() && !data_parallel())) return {};
  auto agg = global_agg(options_.value.agg, mbs);
  if (!agg) return agg.error();
  value_pretrain_options vp{options_.gae.gamma, options_.gae.lambda, agg.value()};
  train_forward_options fwd = options_.forward;
  fwd.want_logprobs = false;
  fwd.want_values = true;
  double loss_sum = 0;
  bool bad = false;
  std::vector<torch::Tensor> values, returns, masks;
  for (auto& b : mbs) {
    auto critic = compute_model(true);
    if (!critic) return critic.error();
    auto f = train_forward(critic.value(), b.tokens_t, b.seq_offsets_n1, fwd);
    if (!f) return f.error();
    auto loss = value_pretrain_loss(f.value().values_t, b.rewards_n, b.loss_mask_t, b.seq_offsets_n1, vp);
    if (!loss) return loss.error();
    if (!all_finite({loss.value().loss})) {
      bad = true;
      break;
    }
    loss.value().loss.backward();
    loss_sum += loss.value().loss.item<double>();
    auto g = gae_packed(f.value().values_t.detach(), b.rewards_n, b.loss_mask_t, b.seq_offsets_n1, options_.gae);
    if (!g) return g.error();
    values.push_back(f.value().values_t.detach());
    returns.push_back(g.value().returns_t);
    masks.push_back(b.loss_mask_t);
  }
  auto skip = sync_before_step(bad, false, true);
  if (!skip) return skip.error();
  if (skip.value()) {
    report.skip_reason = bad ? "non-finite loss" : "non-finite loss on another shard";
    critic_opt_->zero_grad();
    return {};
  }
  report.value_loss = loss_sum;
  if (!values.empty()) {
    auto ev = explained_variance(torch::cat(values), torch::cat(returns), torch::cat(masks));
    report.explained_variance = ev ? ev.value() : 0.0;
  }
  report.critic_step = critic_opt_->step();
  if (!report.critic_step.applied) report.skip_reason = "critic: " + report.critic_step.skip_reason;
  return {};
}

result<double> trainer::value_explained_variance(const rollout_batch& batch) {
  if (!critic_) return fail("trainer: no critic");
  if (auto ok = batch.validate(); !ok) return ok.error();
  torch::NoGradGuard no_grad;
  auto b = to_device(batch, critic_->device());
  train_forward_options fwd = options_.forward;
  fwd.want_logprobs = false;
  fwd.want_values = true;
  auto critic = compute_model(true);
  if (!critic) return critic.error();
  auto f = train_forward(critic.value(), b.tokens_t, b.seq_offsets_n1, fwd);
  if (!f) return f.error();
  auto returns_t = b.rewards_n.index_select(0, segment_ids(b.seq_offsets_n1, b.rewards_n.device())) * b.loss_mask_t;
  return explained_variance(f.value().values_t, returns_t, b.loss_mask_t);
}

result<double> trainer::sampled_nll(const rollout_batch& batch) {
  if (auto ok = batch.validate(); !ok) return ok.error();
  torch::NoGradGuard no_grad;
  auto b = to_device(batch, actor_.device());
  train_forward_options fwd = options_.forward;
  fwd.want_entropy = false;
  auto actor = compute_model(false);
  if (!actor) return actor.error();
  auto f = train_forward(actor.value(), b.tokens_t, b.seq_offsets_n1, fwd);
  if (!f) return f.error();
  return -masked_mean(f.value().logp_t, b.loss_mask_t);
}

std::string step_report::to_json() const {
  char buf[1024];
  std::string out = "{\"stage\":\"" + stage + "\",\"applied\":" + (applied ? "true" : "false");
  std::string reason;
  for (char c : skip_reason) reason += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  out += ",\"skip_reason\":\"" + reason + "\"";
  std::snprintf(buf, sizeof buf,
                ",\"sequences\":%lld,\"tokens\":%lld,\"sampled_tokens\":%lld,\"microbatches\":%lld,"
                "\"policy_loss\":%.9g,\"value_loss\":%.9g,\"nll\":%.9g,\"entropy\":%.9g,"
                "\"explained_variance\":%.9g,\"reward_mean\":%.9g,\"advantage_mean\":%.9g,"
                "\"actor_grad_norm\":%.9g,\"critic_grad_norm\":%.9g,\"seconds\":%.6f,\"lr\":%.9g,"
                "\"old_logprob_seconds\":%.6f,\"update_seconds\":%.6f",
                static_cast<long long>(sequences), static_cast<long long>(tokens),
                static_cast<long long>(sampled_tokens), static_cast<long long>(microbatches), policy_loss, value_loss,
                nll, entropy, explained_variance, reward_mean, advantage_mean, actor_step.grad_norm,
                critic_step.grad_norm, seconds, actor_lr, old_logprob_seconds, update_seconds);
  out += buf;
  if (ppo) {
    std::snprintf(buf, sizeof buf,
                  ",\"clip_fraction\":%.9g,\"ratio_mean\":%.9g,\"ratio_max\":%.9g,\"approx_kl_k3\":%.9g",
                  ppo->clip_fraction, ppo->ratio_mean, ppo->ratio_max, ppo->approx_kl_k3);
    out += buf;
  }
  if (mismatch) {
    std::snprintf(buf, sizeof buf,
                  ",\"mismatch_abs_delta_mean\":%.9g,\"mismatch_abs_delta_max\":%.9g,\"mismatch_kl_k3\":%.9g,"
                  "\"mismatch_ratio_max\":%.9g",
                  mismatch->abs_delta_mean, mismatch->abs_delta_max, mismatch->kl_k3, mismatch->ratio_max);
    out += buf;
  }
  return out + "}";
}

}  // namespace caf_agent::learner
