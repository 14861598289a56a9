#pragma once
// optimizer: AdamW over the fp32 master parameters of one model (the actor or the critic), with
// global gradient-norm clipping and a finiteness check. A step whose gradients hold a NaN or an
// Inf is skipped: the weights and the optimizer state stay exactly as they were, the gradients
// are cleared, and the report says why. The update is torch's fused AdamW kernel (the one
// torch.optim.AdamW(fused=True) runs), on the CPU and on CUDA.
//
// The parameters, their gradient and both moments are each one flat fp32 tensor (flat_params.hpp):
// the norm is one reduction, clipping one scale, the update one fused call and zero_grad a flag;
// only a step that fails the finiteness check looks at the parameters one by one, to name one.

#include <cstdint>
#include <memory>
#include <string>

#include <torch/types.h>

#include "learner/flat_params.hpp"
#include "learner/result.hpp"
#include "policy/model/safetensors.hpp"

namespace caf_agent::learner {

/// Rationale: the CUDA Agent paper's actor learning rate.
inline constexpr double default_actor_lr = 3e-6;
/// Rationale: the CUDA Agent paper's critic learning rate.
inline constexpr double default_critic_lr = 6e-6;

/// AdamW hyperparameters.
struct adamw_options {
  double lr = default_actor_lr;  ///< Learning rate.
  double beta1 = 0.9;            ///< Rationale: the usual AdamW betas (verl's defaults).
  double beta2 = 0.999;          ///< See beta1.
  double eps = 1e-8;             ///< Denominator floor.
  double weight_decay = 0.01;    ///< Rationale: verl's actor/critic default (decoupled decay).
  /// Clip the global L2 norm of all gradients to this; <= 0 disables clipping.
  /// Rationale: 1.0 is verl's and OpenRLHF's default grad_clip for PPO.
  double max_grad_norm = 1.0;

  /// Checks ranges (lr >= 0, betas in [0, 1), eps > 0, weight_decay >= 0).
  status validate() const;
};

/// What one step did.
struct optimizer_step_report {
  bool applied = false;     ///< False when the step was skipped.
  std::string skip_reason;  ///< Why it was skipped (names the first non-finite gradient).
  double grad_norm = 0;     ///< Global L2 norm of the gradients before clipping.
  bool clipped = false;     ///< The gradients were scaled down to max_grad_norm.
};

/// AdamW over named fp32 parameters (handles to the model's tensors, updated in place).
class adamw {
 public:
  /// An optimizer over `params` (every tensor fp32 and a leaf; requires_grad is switched on),
  /// which move into one flat buffer (flat_params::create; values, names and shapes unchanged).
  /// Errors: an empty map, a non-fp32 or non-leaf tensor, two sharing memory, bad options.
  static result<adamw> create(const policy::tensor_map& params, const adamw_options& options);

  /// Clips, checks and applies the accumulated gradients (the flat gradient plus any .grad on a
  /// parameter), then clears them. A parameter without a gradient counts as a zero gradient
  /// (AdamW still decays and moves it by its moments).
  optimizer_step_report step();
  /// Clears the gradients without a step.
  void zero_grad();

  /// Steps applied so far.
  int64_t steps() const { return steps_; }
  /// The options (the learning rate may be changed between steps).
  adamw_options& options() { return options_; }
  /// The moments by name: "exp_avg.<param>" and "exp_avg_sq.<param>" (fp32, the live tensors).
  policy::tensor_map state() const;
  /// Restores moments written by state() and the step count. Errors name a missing tensor or a
  /// shape that differs from the parameter's; nothing changes then.
  status load_state(const policy::tensor_map& state, int64_t steps);
  /// The flat parameters and gradient (a compute copy adds its gradients there).
  const std::shared_ptr<flat_params>& flat() const { return flat_; }

 private:
  adamw_options options_;
  std::shared_ptr<flat_params> flat_;
  torch::Tensor exp_avg_p_, exp_avg_sq_p_;  ///< fp32 [p], laid out as flat_->values_p().
  torch::Tensor step_;                      ///< fp32 scalar: the fused kernel's step count.
  int64_t steps_ = 0;
};

}  // namespace caf_agent::learner
