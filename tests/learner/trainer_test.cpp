// The trainer on the toy multi-turn environment: PPO + GAE + critic learns it from chance to a
// mean reward above 0.9, RFT lowers the NLL of filtered trajectories, value pretraining raises
// the critic's explained variance on held-out trajectories above 0.5; AdamW's first step and
// its skip on non-finite gradients; a checkpointed and resumed run equals an uninterrupted one.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <string>

#include "learner/checkpoint.hpp"
#include "learner/optimizer.hpp"
#include "learner/toy_env.hpp"
#include "learner/trainer.hpp"
#include "tests/learner/tiny_decoder.hpp"

namespace caf_agent::learner {
namespace {

using test_support::tiny_config;
using test_support::tiny_decoder;

// Rationale: std 0.02 (transformers' init) gives a near-uniform policy: chance level at start.
constexpr double init_scale = 0.02;

trainer_options toy_options() {
  // Rationale: the toy model's tensors are a few KB; intra-op threads only spin against each
  // other (10x slower on a loaded 2-core machine).
  at::set_num_threads(1);
  trainer_options o;
  // Rationale: a 2-layer width-32 model learns at Adam lr 3e-3; the paper's 3e-6 / 6e-6 are
  // for a pretrained billion-parameter model and would need thousands of steps here.
  o.actor_optimizer.lr = 3e-3;
  o.critic_optimizer.lr = 3e-3;
  o.ppo_epochs = 2;
  o.normalize_advantages = true;
  o.forward.logprob_chunk = 256;
  return o;
}

double mean_reward(const rollout_batch& b) {
  return b.rewards_n.mean().item<double>();
}

TEST(trainer, ppo_with_gae_and_critic_learns_the_toy_environment) {
  toy_env env({.turns = 3, .observations = 4});
  auto config = tiny_config(env.vocab_size(), 2);
  auto made =
      trainer::create(tiny_decoder(config, 11, init_scale), tiny_decoder(config, 11, init_scale), toy_options());
  ASSERT_TRUE(made) << made.error().message;
  auto& t = made.value();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const double before = mean_reward(env.sample(t.actor(), 512, gen));
  // Rationale: uniform over 9 tokens scores 1/9 per turn; 0.3 leaves room for a lucky init.
  EXPECT_LT(before, 0.3);
  double after = 0;
  // Rationale: converges in about 60-100 updates at this seed; 200 bounds the test's time.
  for (int step = 0; step < 200; ++step) {
    auto batch = env.sample(t.actor(), 64, gen);
    auto r = t.step(batch, train_stage::ppo);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_TRUE(r.value().applied) << r.value().skip_reason;
    ASSERT_TRUE(r.value().mismatch.has_value());
    // The trainer recomputes what the sampler computed with the same weights in fp32.
    EXPECT_LT(r.value().mismatch->abs_delta_max, 1e-4);
    if (step % 10 == 9) {
      after = mean_reward(env.sample(t.actor(), 512, gen));
      if (after > 0.95) break;
    }
  }
  after = mean_reward(env.sample(t.actor(), 1024, gen));
  std::cout << "ppo: mean reward " << before << " -> " << after << " in " << t.steps() << " steps\n";
  EXPECT_GT(after, 0.9) << "mean reward " << before << " -> " << after;
}

TEST(trainer, rft_lowers_the_nll_of_filtered_trajectories) {
  toy_env env({.turns = 3, .observations = 4});
  auto config = tiny_config(env.vocab_size(), 2);
  auto made = trainer::create(tiny_decoder(config, 12, init_scale), std::nullopt, toy_options());
  ASSERT_TRUE(made);
  auto& t = made.value();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(8);
  auto all = env.sample(t.actor(), 512, gen);
  std::vector<int64_t> kept;  // rejection sampling: keep trajectories with 2 of 3 turns right
  for (int64_t i = 0; i < all.sequences(); ++i)
    if (all.rewards_n[i].item<double>() >= 0.6) kept.push_back(i);
  ASSERT_GE(kept.size(), 5u);
  auto filtered = all.select(kept);
  const double before = t.sampled_nll(filtered).value();
  for (int step = 0; step < 40; ++step) {
    auto r = t.step(filtered, train_stage::rft);
    ASSERT_TRUE(r && r.value().applied);
  }
  const double after = t.sampled_nll(filtered).value();
  std::cout << "rft: NLL of " << kept.size() << " filtered trajectories " << before << " -> " << after << "\n";
  // Rationale: a near-uniform start has NLL ~ln 9 = 2.2; 40 steps on a few dozen trajectories
  // must at least halve it (a broken gradient leaves it near 2.2).
  EXPECT_LT(after, 0.5 * before) << before << " -> " << after;
}

TEST(trainer, value_pretraining_raises_explained_variance_on_held_out_trajectories) {
  toy_env env({.turns = 2, .observations = 4});
  auto config = tiny_config(env.vocab_size(), 2);
  auto made =
      trainer::create(tiny_decoder(config, 13, init_scale), tiny_decoder(config, 13, init_scale), toy_options());
  ASSERT_TRUE(made);
  auto& t = made.value();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  // A frozen behaviour that is right exactly on observations 1 and 2: the outcome of every turn
  // is visible in the context, so a good critic explains up to 75% of the return's variance.
  auto train = env.scripted(256, {1, 2}, gen);
  auto held_out = env.scripted(256, {1, 2}, gen);
  const double before = t.value_explained_variance(held_out).value();
  EXPECT_LT(before, 0.2);
  double after = before;
  int steps = 0;
  // Rationale: bounded at 150 updates; stops once the held-out EV is clearly past the bar.
  while (steps < 150 && after < 0.6) {
    for (int i = 0; i < 25; ++i, ++steps) {
      auto r = t.step(train, train_stage::value_pretrain);
      ASSERT_TRUE(r && r.value().applied);
    }
    after = t.value_explained_variance(held_out).value();
  }
  std::cout << "value pretraining: held-out explained variance " << before << " -> " << after << " in " << steps
            << " steps\n";
  EXPECT_GT(after, 0.5) << before << " -> " << after;
}

TEST(trainer, all_masked_batch_is_a_recorded_skip) {
  toy_env env({.turns = 2, .observations = 4});
  auto config = tiny_config(env.vocab_size(), 1);
  auto made = trainer::create(tiny_decoder(config, 14), tiny_decoder(config, 14), toy_options());
  ASSERT_TRUE(made);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  auto batch = env.sample(made.value().actor(), 4, gen);
  batch.loss_mask_t.zero_();
  auto before = made.value().actor().named_parameters().at("model.norm.weight").clone();
  auto r = made.value().step(batch, train_stage::ppo);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r.value().applied);
  EXPECT_NE(r.value().skip_reason.find("masked"), std::string::npos);
  EXPECT_TRUE(before.equal(made.value().actor().named_parameters().at("model.norm.weight")));
}

TEST(trainer, token_budget_microbatches_equal_the_whole_batch) {
  toy_env env({.turns = 2, .observations = 4});
  auto config = tiny_config(env.vocab_size(), 2);
  auto opts = toy_options();
  // Rationale: with eps 1e-8 Adam's step g / (|g| + eps) turns 1e-9 summation noise in near-zero
  // gradients into 1e-4 weight differences; eps 1e-3 keeps the weights a smooth function of g.
  opts.actor_optimizer.eps = opts.critic_optimizer.eps = 1e-3;
  auto whole = trainer::create(tiny_decoder(config, 17, 0.1), tiny_decoder(config, 17, 0.1), opts).value();
  opts.max_tokens_per_microbatch = 3 * env.episode_tokens();  // 3 episodes per micro-batch
  auto split = trainer::create(tiny_decoder(config, 17, 0.1), tiny_decoder(config, 17, 0.1), opts).value();
  for (int64_t i = 0; i < 2; ++i) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(200 + i);
    auto batch = env.sample(whole.actor(), 10, gen);
    auto a = whole.step(batch, train_stage::ppo);
    auto b = split.step(batch, train_stage::ppo);
    ASSERT_TRUE(a && b && a.value().applied && b.value().applied);
    EXPECT_EQ(b.value().microbatches, 4);
    EXPECT_NEAR(a.value().policy_loss, b.value().policy_loss, 1e-6);
    EXPECT_NEAR(a.value().actor_step.grad_norm, b.value().actor_step.grad_norm, 1e-5);
    EXPECT_NEAR(a.value().critic_step.grad_norm, b.value().critic_step.grad_norm, 1e-5);
  }
  for (auto* part : {"actor", "critic"}) {
    auto& ma = std::string(part) == "actor" ? whole.actor() : whole.critic();
    auto& mb = std::string(part) == "actor" ? split.actor() : split.critic();
    for (const auto& [name, p] : ma.named_parameters())
      // Rationale: summation order only; each step moves a weight by up to lr = 3e-3.
      EXPECT_LE((p - mb.named_parameters().at(name)).abs().max().item<double>(), 1e-5) << part << " " << name;
  }
}

TEST(trainer, non_finite_loss_skips_the_step_and_keeps_every_weight) {
  toy_env env({.turns = 2, .observations = 4});
  auto config = tiny_config(env.vocab_size(), 1);
  auto made = trainer::create(tiny_decoder(config, 16), tiny_decoder(config, 16), toy_options());
  ASSERT_TRUE(made);
  auto& t = made.value();
  {  // A critic whose values overflow: its squared error is Inf.
    torch::NoGradGuard no_grad;
    t.critic().named_parameters().at("value_head.weight").mul_(1e37);
  }
  std::map<std::string, torch::Tensor> before;
  for (auto* m : {&t.actor(), &t.critic()})
    for (const auto& [name, p] : m->named_parameters()) before[(m == &t.actor() ? "a." : "c.") + name] = p.clone();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2);
  auto r = t.step(env.sample(t.actor(), 8, gen), train_stage::ppo);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r.value().applied);
  EXPECT_NE(r.value().skip_reason.find("non-finite"), std::string::npos) << r.value().skip_reason;
  EXPECT_EQ(t.steps(), 0);
  for (auto* m : {&t.actor(), &t.critic()})
    for (const auto& [name, p] : m->named_parameters())
      EXPECT_TRUE(p.equal(before.at((m == &t.actor() ? "a." : "c.") + name))) << name;
}

TEST(adamw, first_step_matches_the_closed_form_and_clips) {
  auto p = torch::randn({5});
  policy::tensor_map params{{"p", p}};
  auto opt = adamw::create(params, {.lr = 0.1, .weight_decay = 0.01, .max_grad_norm = 0});
  ASSERT_TRUE(opt);
  auto p0 = p.detach().clone();
  auto g = torch::randn({5});
  p.mutable_grad() = g.clone();
  auto r = opt.value().step();
  ASSERT_TRUE(r.applied);
  // Step 1: bias-corrected m = g, v = g^2, so the update is lr * g / (|g| + eps) after decay.
  auto want = p0 * (1 - 0.1 * 0.01) - 0.1 * g / (g.abs() + 1e-8);
  EXPECT_LT((p.detach() - want).abs().max().item<double>(), 1e-6);
  EXPECT_NEAR(r.grad_norm, g.norm().item<double>(), 1e-5);
  opt.value().options().max_grad_norm = 0.5;
  p.mutable_grad() = torch::full({5}, 10.0);
  r = opt.value().step();
  EXPECT_TRUE(r.clipped);
  EXPECT_EQ(opt.value().steps(), 2);
}

TEST(adamw, non_finite_gradient_skips_the_step_and_keeps_the_weights) {
  auto a = torch::randn({3}), b = torch::randn({2, 2});
  auto opt = adamw::create({{"a", a}, {"b", b}}, {.lr = 0.1});
  ASSERT_TRUE(opt);
  auto a0 = a.detach().clone(), b0 = b.detach().clone();
  a.mutable_grad() = torch::ones({3});
  b.mutable_grad() = torch::ones({2, 2});
  b.mutable_grad()[1][0] = std::numeric_limits<float>::infinity();
  auto r = opt.value().step();
  EXPECT_FALSE(r.applied);
  EXPECT_NE(r.skip_reason.find("'b'"), std::string::npos) << r.skip_reason;
  EXPECT_TRUE(a.detach().equal(a0));
  EXPECT_TRUE(b.detach().equal(b0));
  EXPECT_EQ(opt.value().steps(), 0);
  EXPECT_FALSE(a.grad().defined());
}

/// k PPO steps from a fixed start; batch i is sampled with a generator seeded by i (the cursor).
void run_steps(trainer& t, const toy_env& env, int64_t from, int64_t to) {
  for (int64_t i = from; i < to; ++i) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(100 + i);
    auto r = t.step(env.sample(t.actor(), 16, gen), train_stage::ppo);
    ASSERT_TRUE(r && r.value().applied);
  }
}

TEST(checkpoint, resumed_run_equals_the_uninterrupted_one) {
  toy_env env({.turns = 2, .observations = 4});
  auto config = tiny_config(env.vocab_size(), 2);
  auto make = [&] {
    return trainer::create(tiny_decoder(config, 15, 0.1), tiny_decoder(config, 15, 0.1), toy_options()).value();
  };
  const auto root = std::filesystem::temp_directory_path() / ("learner_ckpt_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  auto a = make();
  run_steps(a, env, 0, 3);
  auto saved = save_checkpoint(root.string(), {3, 3}, a.checkpoint_parts());
  ASSERT_TRUE(saved) << saved.error().message;
  EXPECT_FALSE(save_checkpoint(root.string(), {3, 3}, a.checkpoint_parts()));  // never overwrites
  const auto draw_after_save = torch::rand({8});  // the RNG state was saved before this draw
  run_steps(a, env, 3, 5);

  auto b = make();
  auto cursor = load_checkpoint(root.string(), b.checkpoint_parts());
  ASSERT_TRUE(cursor) << cursor.error().message;
  EXPECT_EQ(cursor.value().step, 3);
  EXPECT_TRUE(torch::rand({8}).equal(draw_after_save));  // the RNG state was restored
  run_steps(b, env, cursor.value().data_cursor, 5);
  for (auto* part : {"actor", "critic"}) {
    auto& ma = std::string(part) == "actor" ? a.actor() : a.critic();
    auto& mb = std::string(part) == "actor" ? b.actor() : b.critic();
    for (const auto& [name, p] : ma.named_parameters())
      EXPECT_LE((p - mb.named_parameters().at(name)).abs().max().item<double>(), 1e-7) << part << " " << name;
  }
  // The actor is a plain Hugging Face checkpoint the engine can load.
  EXPECT_TRUE(policy::decoder::load(saved.value() + "/actor", torch::kCPU, torch::kFloat32));

  auto wider = tiny_config(env.vocab_size(), 2);
  wider.intermediate_size = 48;
  auto other = trainer::create(tiny_decoder(wider, 15), tiny_decoder(wider, 15), toy_options()).value();
  auto before = other.actor().named_parameters().at("model.norm.weight").clone();
  auto bad = load_checkpoint(root.string(), other.checkpoint_parts());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("shape"), std::string::npos) << bad.error().message;
  EXPECT_TRUE(before.equal(other.actor().named_parameters().at("model.norm.weight")));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace caf_agent::learner
