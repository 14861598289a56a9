// Shape legend: p elements of all the optimizer's parameters together (flat_params.hpp).
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
  auto flat = flat_params::create(params);
  if (!flat) return fail("adamw: " + flat.error().message);
  adamw out;
  out.options_ = options;
  out.flat_ = std::move(flat.value());
  const auto& values_p = out.flat_->values_p();
  out.exp_avg_p_ = torch::zeros_like(values_p, torch::MemoryFormat::Contiguous).requires_grad_(false);
  out.exp_avg_sq_p_ = torch::zeros_like(values_p, torch::MemoryFormat::Contiguous).requires_grad_(false);
  // Rationale: the fused kernel takes one fp32 step tensor per parameter tensor on its device.
  out.step_ = torch::zeros({}, values_p.options().dtype(torch::kFloat32)).requires_grad_(false);
  return out;
}

void adamw::zero_grad() {
  flat_->zero_grad();
}

optimizer_step_report adamw::step() {
  at::NoGradGuard no_grad;
  optimizer_step_report report;
  const auto& grad_p = flat_->grad_p();
  report.grad_norm = grad_p.norm().item<double>();
  if (!std::isfinite(report.grad_norm)) {
    // Rationale: per-parameter checks only here, when the one reduction already failed.
    const std::string name = flat_->first_non_finite_grad();
    report.skip_reason = name.empty() ? "non-finite global gradient norm" : "non-finite gradient in '" + name + "'";
    zero_grad();
    return report;
  }
  if (options_.max_grad_norm > 0 && report.grad_norm > options_.max_grad_norm) {
    // Rationale: the 1e-6 guard is torch.nn.utils.clip_grad_norm_'s.
    grad_p.mul_(options_.max_grad_norm / (report.grad_norm + 1e-6));
    report.clipped = true;
  }
  step_.add_(1);
  at::_fused_adamw_({flat_->values_p()}, {grad_p}, {exp_avg_p_}, {exp_avg_sq_p_}, {}, {step_}, options_.lr,
                    options_.beta1, options_.beta2, options_.weight_decay, options_.eps, /*amsgrad=*/false,
                    /*maximize=*/false);
  flat_->mark_values_written();
  ++steps_;
  report.applied = true;
  zero_grad();
  return report;
}

policy::tensor_map adamw::state() const {
  policy::tensor_map out;
  const auto& names = flat_->names();
  auto m = flat_->views(exp_avg_p_), v = flat_->views(exp_avg_sq_p_);
  for (size_t i = 0; i < names.size(); ++i) {
    out["exp_avg." + names[i]] = m[i];
    out["exp_avg_sq." + names[i]] = v[i];
  }
  return out;
}

status adamw::load_state(const policy::tensor_map& state, int64_t steps) {
  if (steps < 0) return fail("adamw: negative step count in the optimizer state");
  const auto& names = flat_->names();
  const auto& params = flat_->params();
  for (size_t i = 0; i < names.size(); ++i) {
    for (const char* kind : {"exp_avg.", "exp_avg_sq."}) {
      auto it = state.find(kind + names[i]);
      if (it == state.end()) return fail("optimizer state lacks '" + std::string(kind) + names[i] + "'");
      if (it->second.sizes() != params[i].sizes())
        return fail("optimizer state '" + std::string(kind) + names[i] + "' has a different shape than the parameter");
    }
  }
  if (state.size() != 2 * names.size())
    return fail("optimizer state has " + std::to_string(state.size()) + " tensors, the model needs " +
                std::to_string(2 * names.size()));
  at::NoGradGuard no_grad;
  auto m = flat_->views(exp_avg_p_), v = flat_->views(exp_avg_sq_p_);
  for (size_t i = 0; i < names.size(); ++i) {
    m[i].copy_(state.at("exp_avg." + names[i]));
    v[i].copy_(state.at("exp_avg_sq." + names[i]));
  }
  step_.fill_(static_cast<double>(steps));
  steps_ = steps;
  return {};
}

}  // namespace caf_agent::learner
