#include "learner/optimizer.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>

namespace caf_agent::learner {

status adamw_options::validate() const {
  if (!(lr >= 0)) return fail("adamw: lr must be >= 0");
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1)) return fail("adamw: betas must lie in [0, 1)");
  if (!(eps > 0)) return fail("adamw: eps must be > 0");
  if (!(weight_decay >= 0)) return fail("adamw: weight_decay must be >= 0");
  return {};
}

result<adamw> adamw::create(const policy::tensor_map& params, const adamw_options& options) {
  if (auto ok = options.validate(); !ok) return ok.error();
  if (params.empty()) return fail("adamw: no parameters");
  adamw out;
  out.options_ = options;
  for (const auto& [name, p] : params) {
    if (p.scalar_type() != torch::kFloat32)
      return fail("adamw: parameter '" + name + "' is not fp32 (master weights must be fp32)");
    if (!p.is_leaf()) return fail("adamw: parameter '" + name + "' is not a leaf tensor");
    p.requires_grad_(true);
    out.names_.push_back(name);
    out.params_.push_back(p);
    out.exp_avg_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    out.exp_avg_sq_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    // Rationale: the fused kernel takes one fp32 step tensor per parameter on its device.
    out.steps_per_param_.push_back(torch::zeros({}, p.options().dtype(torch::kFloat32)));
  }
  return out;
}

void adamw::zero_grad() {
  for (auto& p : params_)
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
}

optimizer_step_report adamw::step() {
  at::NoGradGuard no_grad;
  optimizer_step_report report;
  std::vector<torch::Tensor> grads;
  for (auto& p : params_) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  auto norms = at::_foreach_norm(grads, 2);
  report.grad_norm = torch::stack(norms).norm().item<double>();
  if (!std::isfinite(report.grad_norm)) {
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!std::isfinite(norms[i].item<double>())) {
        report.skip_reason = "non-finite gradient in '" + names_[i] + "'";
        break;
      }
    }
    if (report.skip_reason.empty()) report.skip_reason = "non-finite global gradient norm";
    zero_grad();
    return report;
  }
  if (options_.max_grad_norm > 0 && report.grad_norm > options_.max_grad_norm) {
    // Rationale: the 1e-6 guard is torch.nn.utils.clip_grad_norm_'s.
    at::_foreach_mul_(grads, options_.max_grad_norm / (report.grad_norm + 1e-6));
    report.clipped = true;
  }
  at::_foreach_add_(steps_per_param_, 1);
  at::_fused_adamw_(params_, grads, exp_avg_, exp_avg_sq_, {}, steps_per_param_, options_.lr, options_.beta1,
                    options_.beta2, options_.weight_decay, options_.eps, /*amsgrad=*/false,
                    /*maximize=*/false);
  ++steps_;
  report.applied = true;
  zero_grad();
  return report;
}

policy::tensor_map adamw::state() const {
  policy::tensor_map out;
  for (size_t i = 0; i < names_.size(); ++i) {
    out["exp_avg." + names_[i]] = exp_avg_[i];
    out["exp_avg_sq." + names_[i]] = exp_avg_sq_[i];
  }
  return out;
}

status adamw::load_state(const policy::tensor_map& state, int64_t steps) {
  if (steps < 0) return fail("adamw: negative step count in the optimizer state");
  for (size_t i = 0; i < names_.size(); ++i) {
    for (const char* kind : {"exp_avg.", "exp_avg_sq."}) {
      auto it = state.find(kind + names_[i]);
      if (it == state.end()) return fail("optimizer state lacks '" + std::string(kind) + names_[i] + "'");
      if (it->second.sizes() != params_[i].sizes())
        return fail("optimizer state '" + std::string(kind) + names_[i] + "' has a different shape than the parameter");
    }
  }
  if (state.size() != 2 * names_.size())
    return fail("optimizer state has " + std::to_string(state.size()) + " tensors, the model needs " +
                std::to_string(2 * names_.size()));
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < names_.size(); ++i) {
    exp_avg_[i].copy_(state.at("exp_avg." + names_[i]));
    exp_avg_sq_[i].copy_(state.at("exp_avg_sq." + names_[i]));
    steps_per_param_[i].fill_(static_cast<double>(steps));
  }
  steps_ = steps;
  return {};
}

}  // namespace caf_agent::learner
