// The c10d process group with real shard processes on loopback: the gloo all-reduce equals the
// mean computed locally, broadcast and barrier work, and a peer that dies or hangs makes the
// other fail with an error within the timeout instead of hanging.
//
// The test binary is also the shard: `learner_data_parallel_test --shard SCENARIO RANK WORLD
// PORT` runs one rank of a scenario (this file's main), which the tests start with posix_spawn.

#include "learner/data_parallel.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "learner/losses.hpp"
#include "learner/packing.hpp"
#include "learner/trainer.hpp"
#include "tests/learner/tiny_decoder.hpp"

extern char** environ;

namespace caf_agent::learner {
namespace {

using clock_type = std::chrono::steady_clock;

// ---- the shard side -------------------------------------------------------------------------

// Rank k's "gradients": distinct per rank, one non-contiguous, several dtypes and sizes, so
// that the 256-byte buckets below split and group them.
std::vector<torch::Tensor> gradients_of(int64_t k) {
  const double s = static_cast<double>(k + 1);
  return {torch::arange(100, torch::kFloat32) * s + 0.25,
          torch::sin(torch::arange(35, torch::kFloat32).reshape({7, 5}) * s).t(),
          torch::cos(torch::arange(3, torch::kFloat64) * s), torch::full({1}, static_cast<float>(k * k))};
}

process_group_options options_for(int64_t rank, int64_t world, uint16_t port, std::chrono::milliseconds timeout) {
  process_group_options o;
  o.rank = rank;
  o.world_size = world;
  o.master_addr = "127.0.0.1";
  o.master_port = port;
  o.timeout = timeout;
  o.backend = dp_backend::gloo;
  o.bucket_bytes = 256;  // Rationale: small, so the test's few tensors make several buckets
  return o;
}

int shard_mean(int64_t rank, int64_t world, uint16_t port) {
  auto pg = process_group::create(options_for(rank, world, port, std::chrono::seconds(30)));
  if (!pg) return std::cerr << pg.error().message << "\n", 2;
  auto grads = gradients_of(rank);
  std::vector<torch::Tensor> expected;
  for (size_t i = 0; i < grads.size(); ++i) {
    auto sum = torch::zeros_like(grads[i], torch::kFloat64);
    for (int64_t k = 0; k < world; ++k) sum += gradients_of(k)[i].to(torch::kFloat64);
    expected.push_back(sum / static_cast<double>(world));
  }
  if (auto ok = (*pg)->all_reduce_mean(grads); !ok) return std::cerr << ok.error().message << "\n", 3;
  for (size_t i = 0; i < grads.size(); ++i) {
    const double diff = (grads[i].to(torch::kFloat64) - expected[i]).abs().max().item<double>();
    if (!(diff <= 1e-6)) return std::cerr << "tensor " << i << " differs from the local mean by " << diff << "\n", 4;
  }
  // Broadcast from rank 0 and from the last rank.
  std::vector<torch::Tensor> params{torch::full({10}, static_cast<float>(rank)), torch::full({2, 2}, rank * 2.0)};
  if (auto ok = (*pg)->broadcast(params, 0); !ok) return std::cerr << ok.error().message << "\n", 5;
  if (params[0].abs().max().item<float>() != 0 || params[1].abs().max().item<double>() != 0) return 6;
  std::vector<torch::Tensor> last{torch::full({3}, static_cast<float>(rank))};
  if (auto ok = (*pg)->broadcast(last, world - 1); !ok) return 7;
  if (last[0].min().item<float>() != static_cast<float>(world - 1)) return 8;
  std::vector<torch::Tensor> ints{torch::tensor({rank}, torch::kInt64)};
  if (auto ok = (*pg)->all_reduce(ints, reduce_op::max); !ok || ints[0].item<int64_t>() != world - 1) return 9;
  if (auto ok = (*pg)->barrier(); !ok) return std::cerr << ok.error().message << "\n", 10;
  std::cout << "rank " << rank << " ok\n";
  return 0;
}

// rank 1 takes part in one all-reduce and then dies (scenario die) or stops answering (hang);
// rank 0's second all-reduce must fail within the timeout. Exit 0 when it does.
int shard_peer_lost(int64_t rank, int64_t world, uint16_t port, bool hang) {
  const auto timeout = std::chrono::milliseconds(2000);  // Rationale: short, to keep the test fast
  auto pg = process_group::create(options_for(rank, world, port, timeout));
  if (!pg) return std::cerr << pg.error().message << "\n", 2;
  std::vector<torch::Tensor> grads{torch::ones({16})};
  if (auto ok = (*pg)->all_reduce_mean(grads); !ok) return std::cerr << ok.error().message << "\n", 3;
  if (rank != 0) {
    if (hang) std::this_thread::sleep_for(std::chrono::seconds(120));  // the test kills it
    _exit(0);  // dies without a goodbye: no destructor, no barrier
  }
  const auto start = clock_type::now();
  auto second = (*pg)->all_reduce_mean(grads);
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - start);
  if (second) return std::cerr << "the all-reduce with a lost peer succeeded\n", 4;
  std::cout << "error after " << waited.count() << " ms: " << second.error().message << "\n";
  // Rationale: the timeout plus slack for a loaded 2-core CI machine.
  if (waited > timeout + std::chrono::seconds(5)) return 5;
  auto third = (*pg)->barrier();  // the group is poisoned: fails at once, no second wait
  if (third || third.error().message.find("failed earlier") == std::string::npos) return 6;
  std::cout.flush();
  _exit(0);  // Rationale: skip the backend's teardown, which may wait on the lost peer
}

// A toy policy logp_t = -softplus(x_t . w) trained with PPO for 3 SGD steps, once on the whole
// batch in this process and once sharded: the packing deals the trajectories' micro-batches to
// the ranks, each rank accumulates its micro-batches' gradients with the global denominator, and
// the gradients are all-reduced (sum). Both must give the same weights (fp32, 1e-6).
int shard_equivalence(int64_t rank, int64_t world, uint16_t port) {
  auto pg = process_group::create(options_for(rank, world, port, std::chrono::seconds(30)));
  if (!pg) return std::cerr << pg.error().message << "\n", 2;
  torch::manual_seed(0);  // the same batch on every rank
  const std::vector<int64_t> lengths{5, 9, 3, 7, 4, 8};
  std::vector<int64_t> offsets{0};
  for (auto l : lengths) offsets.push_back(offsets.back() + l);
  const int64_t t = offsets.back();
  const auto x_td = torch::randn({t, 4});
  auto mask_t = (torch::rand({t}) > 0.3).to(torch::kInt64);
  for (size_t s = 0; s < lengths.size(); ++s) mask_t[offsets[s + 1] - 1] = 1;  // one action at least
  const auto adv_t = torch::randn({t});
  const auto w0_d = torch::randn({4}) * 0.5;
  const auto logp_of = [&](const torch::Tensor& w_d, const torch::Tensor& x) {
    return -torch::nn::functional::softplus(x.matmul(w_d));
  };
  const auto old_t = logp_of(w0_d, x_td).detach();
  const double lr = 0.5;  // Rationale: large enough that later steps clip
  ppo_options o;

  // One process, whole batch.
  auto w_ref_d = w0_d.clone().requires_grad_(true);
  for (int step = 0; step < 3; ++step) {
    ppo_batch b{logp_of(w_ref_d, x_td), old_t, adv_t, mask_t, torch::tensor(offsets), {}};
    auto r = ppo_policy_loss(b, o);
    if (!r) return std::cerr << r.error().message << "\n", 3;
    auto g_d = torch::autograd::grad({r->loss}, {w_ref_d})[0];
    torch::NoGradGuard no_grad;
    w_ref_d -= lr * g_d;
  }

  // Sharded: this rank's micro-batches of the packing plan.
  auto plan = pack_microbatches(lengths, {12, world});
  if (!plan) return std::cerr << plan.error().message << "\n", 4;
  struct packed {
    torch::Tensor x_td, old_t, adv_t, mask_t, offsets_n1;
  };
  std::vector<packed> mine;
  double local_count = 0;
  for (const auto& mb : plan->shards[rank]) {
    if (mb.sequences.empty()) continue;  // an empty micro-batch: no forward, still in the step
    std::vector<int64_t> idx, off{0};
    for (auto s : mb.sequences) {
      for (int64_t i = offsets[s]; i < offsets[s + 1]; ++i) idx.push_back(i);
      off.push_back(off.back() + lengths[s]);
    }
    const auto ix = torch::tensor(idx);
    packed p{x_td.index_select(0, ix), old_t.index_select(0, ix), adv_t.index_select(0, ix), mask_t.index_select(0, ix),
             torch::tensor(off)};
    local_count += aggregation_count(p.mask_t, p.offsets_n1, o.agg.mode);
    mine.push_back(std::move(p));
  }
  std::vector<torch::Tensor> count{torch::tensor({local_count}, torch::kFloat64)};
  if (auto ok = (*pg)->all_reduce(count, reduce_op::sum); !ok) return std::cerr << ok.error().message << "\n", 5;
  o.agg.denominator = count[0].item<double>();
  auto w_d = w0_d.clone().requires_grad_(true);
  for (int step = 0; step < 3; ++step) {
    auto g_d = torch::zeros({4});
    for (const auto& p : mine) {
      ppo_batch b{logp_of(w_d, p.x_td), p.old_t, p.adv_t, p.mask_t, p.offsets_n1, {}};
      auto r = ppo_policy_loss(b, o);
      if (!r) return std::cerr << r.error().message << "\n", 6;
      g_d += torch::autograd::grad({r->loss}, {w_d})[0];
    }
    std::vector<torch::Tensor> grads{g_d};
    if (auto ok = (*pg)->all_reduce(grads, reduce_op::sum); !ok) return std::cerr << ok.error().message << "\n", 7;
    torch::NoGradGuard no_grad;
    w_d -= lr * grads[0];
  }
  const double diff = (w_d - w_ref_d).abs().max().item<double>();
  const double moved = (w_ref_d - w0_d).abs().max().item<double>();
  std::cout << "rank " << rank << ": max |w_sharded - w_one| = " << diff << ", weights moved by " << moved << "\n";
  return diff <= 1e-6 && moved > 1e-3 ? 0 : 8;
}

// The batch of the trainer scenarios: 6 trajectories of mixed lengths, the same on every rank.
const std::vector<int64_t> trainer_lengths{9, 5, 7, 3, 6, 8};

rollout_batch trainer_batch() {
  torch::manual_seed(7);  // the same batch on every rank
  const auto& lengths = trainer_lengths;
  std::vector<int64_t> offsets{0};
  for (auto l : lengths) offsets.push_back(offsets.back() + l);
  const int64_t t = offsets.back();
  rollout_batch batch;
  batch.tokens_t = torch::randint(0, 11, {t}, torch::kInt64);
  batch.seq_offsets_n1 = torch::tensor(offsets, torch::kInt64);
  batch.loss_mask_t = (torch::rand({t}) < 0.6).to(torch::kFloat32);
  for (auto o : offsets)
    if (o < t) batch.loss_mask_t[o] = 0;  // each sequence starts with a prompt token
  batch.sampler_logp_t = -torch::rand({t}) * 2;
  batch.rewards_n = torch::randn({static_cast<int64_t>(lengths.size())});
  return batch;
}

// A trainer of the scenarios' tiny decoder and critic (see shard_trainer for the settings).
result<trainer> make_trainer(const policy::model_config& config, process_group* group) {
  trainer_options o;
  o.ppo_epochs = 1;
  o.actor_optimizer.lr = 1e-3;
  o.critic_optimizer.lr = 1e-3;
  o.actor_optimizer.eps = 1e-3;
  o.critic_optimizer.eps = 1e-3;
  o.max_tokens_per_microbatch = 12;
  o.normalize_advantages = true;
  o.group = group;
  return trainer::create(test_support::tiny_decoder(config, 21), test_support::tiny_decoder(config, 22), o);
}

// The scenarios' verdict: every parameter of both models within 1e-6 of one process's, and the
// actor moved (the steps were applied). Prints the numbers.
int agree(int64_t rank, const char* what, trainer& one, trainer& other, const policy::tensor_map& start) {
  double diff = 0, moved = 0;
  auto compare = [&](policy::decoder& x, policy::decoder& y) {
    for (const auto& [name, p] : x.named_parameters())
      diff = std::max(diff, (p - y.named_parameters().at(name)).abs().max().item<double>());
  };
  compare(one.actor(), other.actor());
  compare(one.critic(), other.critic());
  for (const auto& [name, p] : one.actor().named_parameters())
    moved = std::max(moved, (p - start.at(name)).abs().max().item<double>());
  std::cout << "rank " << rank << ": max |" << what << " - one| = " << diff << ", actor moved by " << moved << "\n";
  return diff <= 1e-6 && moved > 1e-4 ? 0 : 8;
}

// learner::trainer with a process group: 3 PPO steps (AdamW, token-budget micro-batches, whitened
// advantages) of a tiny random decoder and critic, once on the whole batch in this process and
// once as `world` shards each training its share. Every parameter of both models must agree
// (fp32, 1e-6): the shards take the step one process takes. One epoch per step: with two, the
// second epoch's ratios leave 1 and a token near a clip bound can fall on either side of it
// under fp32 noise (the shards pack other micro-batches than one process). AdamW's eps is 1e-3
// here: with the default 1e-8, a gradient component that cancels to ~1e-9 has an update of
// lr * g / (|g| + eps) that turns fp32 summation noise into differences of ~1e-6 (measured
// 2.0e-6 with one epoch, 4.2e-6 with two); a larger eps keeps the update smooth in g, so the
// comparison tests the reduction, not the optimizer's sensitivity.
int shard_trainer(int64_t rank, int64_t world, uint16_t port) {
  auto pg = process_group::create(options_for(rank, world, port, std::chrono::seconds(30)));
  if (!pg) return std::cerr << pg.error().message << "\n", 2;
  const std::vector<int64_t> lengths = trainer_lengths;
  const rollout_batch batch = trainer_batch();
  const auto config = test_support::tiny_config(11, 2);
  auto make = [&](process_group* group) { return make_trainer(config, group); };
  auto one = make(nullptr);
  auto sharded = make(pg->get());
  if (!one || !sharded) return std::cerr << "trainer::create failed\n", 3;
  auto start = test_support::tiny_decoder(config, 21).named_parameters();
  for (int step = 0; step < 3; ++step) {
    auto a = one->step(batch, train_stage::ppo);
    auto b = sharded->step(batch, train_stage::ppo);
    if (!a || !b) return std::cerr << (a ? b.error().message : a.error().message) << "\n", 4;
    if (!a->applied || !b->applied) return std::cerr << "a step was skipped\n", 5;
  }
  return agree(rank, "sharded", one.value(), sharded.value(), start);
}

// The trainer's slices (learner/batch_plan, as rollout/shard_batches sends them): 2 iterations
// of 2 optimizer steps of 4 of the 6 trajectories each (the round robin wraps), each shard
// holding only the trajectories its micro-batches use and running its plan as given, against one
// process stepping on each step's trajectories of the whole batch. The same tolerance and
// settings as shard_trainer; the reports' totals are the whole step's on every shard.
int shard_sliced(int64_t rank, int64_t world, uint16_t port) {
  auto pg = process_group::create(options_for(rank, world, port, std::chrono::seconds(30)));
  if (!pg) return std::cerr << pg.error().message << "\n", 2;
  const std::vector<int64_t> lengths = trainer_lengths;
  const rollout_batch batch = trainer_batch();
  std::vector<int64_t> sampled;
  std::vector<double> rewards;
  for (size_t i = 0, offset = 0; i < lengths.size(); offset += static_cast<size_t>(lengths[i]), ++i) {
    sampled.push_back(static_cast<int64_t>(
        batch.loss_mask_t.narrow(0, static_cast<int64_t>(offset), lengths[i]).sum().item<double>()));
    rewards.push_back(batch.rewards_n[static_cast<int64_t>(i)].item<double>());
  }
  const auto config = test_support::tiny_config(11, 2);
  auto make = [&](process_group* group) { return make_trainer(config, group); };
  auto one = make(nullptr);
  auto sliced = make(pg->get());
  if (!one || !sliced) return std::cerr << "trainer::create failed\n", 3;
  auto start = test_support::tiny_decoder(config, 21).named_parameters();
  const int64_t per_step = 4, steps = 2, n = static_cast<int64_t>(lengths.size());
  for (int64_t iteration = 0; iteration < 2; ++iteration) {
    const int64_t cursor = 2 + iteration * steps * per_step;
    auto slices = plan_batch(lengths, sampled, rewards, {steps, per_step, cursor, 12, world});
    if (!slices) return std::cerr << slices.error().message << "\n", 4;
    const auto& mine = slices.value().at(static_cast<size_t>(rank));
    if (mine.sequences.size() >= lengths.size())
      return std::cerr << "shard " << rank << " was sent the whole batch\n", 9;
    const auto local = batch.select(mine.sequences);  // all the shard receives
    for (int64_t i = 0; i < steps; ++i) {
      std::vector<int64_t> pick;
      for (int64_t k = 0; k < per_step; ++k) pick.push_back((cursor + i * per_step + k) % n);
      auto a = one->step(batch.select(pick), train_stage::ppo);
      auto b = sliced->step(local, train_stage::ppo, mine.steps.at(static_cast<size_t>(i)));
      if (!a || !b) return std::cerr << (a ? b.error().message : a.error().message) << "\n", 4;
      if (!a->applied || !b->applied) return std::cerr << "a step was skipped\n", 5;
      if (a->sequences != b->sequences || a->tokens != b->tokens || a->sampled_tokens != b->sampled_tokens)
        return std::cerr << "the shard's report has other totals than the step's\n", 6;
    }
  }
  return agree(rank, "sliced", one.value(), sliced.value(), start);
}

int run_shard(int argc, char** argv) {
  if (argc != 6) return std::cerr << "usage: --shard SCENARIO RANK WORLD PORT\n", 64;
  const std::string scenario = argv[2];
  const int64_t rank = std::stoll(argv[3]);
  const int64_t world = std::stoll(argv[4]);
  const auto port = static_cast<uint16_t>(std::stoi(argv[5]));
  if (scenario == "mean") return shard_mean(rank, world, port);
  if (scenario == "equivalence") return shard_equivalence(rank, world, port);
  if (scenario == "trainer") return shard_trainer(rank, world, port);
  if (scenario == "sliced") return shard_sliced(rank, world, port);
  if (scenario == "die") return shard_peer_lost(rank, world, port, false);
  if (scenario == "hang") return shard_peer_lost(rank, world, port, true);
  return 64;
}

// ---- the test side --------------------------------------------------------------------------

uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct shard {
  pid_t pid = -1;
  std::string log;  // stdout and stderr of the shard
  int status = -1;  // waitpid status once it ended
};

// Starts `world` shards of `scenario`, each with its output in a file.
std::vector<shard> start_shards(const std::string& scenario, int64_t world) {
  const auto port = std::to_string(free_port());
  std::vector<shard> shards(world);
  for (int64_t r = 0; r < world; ++r) {
    shards[r].log = testing::TempDir() + "learner_dp_" + scenario + "_" + std::to_string(r) + "_" + port + ".log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, shards[r].log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const std::string rank = std::to_string(r), w = std::to_string(world);
    std::vector<std::string> args{"/proc/self/exe", "--shard", scenario, rank, w, port};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&shards[r].pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  return shards;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Waits for shard `which` (or all when -1) until `deadline`; kills every shard still running
// afterwards, so a hang fails the test instead of hanging it. True when the awaited ones ended.
bool wait_shards(std::vector<shard>& shards, std::chrono::seconds deadline, int which = -1) {
  const auto until = clock_type::now() + deadline;
  bool done = false;
  while (!done && clock_type::now() < until) {
    done = true;
    for (size_t i = 0; i < shards.size(); ++i) {
      auto& s = shards[i];
      if (s.status == -1 && waitpid(s.pid, &s.status, WNOHANG) == 0) s.status = -1;
      if ((which < 0 || static_cast<int>(i) == which) && s.status == -1) done = false;
    }
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& s : shards) {
    if (s.status == -1) {
      kill(s.pid, SIGKILL);
      waitpid(s.pid, &s.status, 0);
    }
  }
  return done;
}

bool exited_zero(const shard& s) {
  return WIFEXITED(s.status) && WEXITSTATUS(s.status) == 0;
}

// Removes the shards' logs once a test passed (a failing test keeps them for a look).
void remove_logs(const std::vector<shard>& shards) {
  if (testing::Test::HasFailure()) return;
  for (const auto& s : shards) std::remove(s.log.c_str());
}

// Rationale: a few seconds per shard on a loaded 2-core machine (each loads LibTorch).
constexpr auto shard_deadline = std::chrono::seconds(60);

TEST(DataParallel, GlooAllReduceEqualsTheLocalMean) {
  if (!process_group::backend_available(dp_backend::gloo)) GTEST_SKIP() << "built without gloo's headers";
  for (int64_t world : {2, 3}) {
    auto shards = start_shards("mean", world);
    ASSERT_TRUE(wait_shards(shards, shard_deadline)) << "shards did not finish";
    for (int64_t r = 0; r < world; ++r)
      EXPECT_TRUE(exited_zero(shards[r])) << "world " << world << " rank " << r << ": " << read_file(shards[r].log);
    remove_logs(shards);
  }
}

TEST(DataParallel, ShardsEqualOneProcessOnTheCombinedBatch) {
  if (!process_group::backend_available(dp_backend::gloo)) GTEST_SKIP() << "built without gloo's headers";
  auto shards = start_shards("equivalence", 2);
  ASSERT_TRUE(wait_shards(shards, shard_deadline)) << "shards did not finish";
  for (int64_t r = 0; r < 2; ++r)
    EXPECT_TRUE(exited_zero(shards[r])) << "rank " << r << ": " << read_file(shards[r].log);
  remove_logs(shards);
}

TEST(DataParallel, TrainerShardsEqualOneProcessOnTheWholeBatch) {
  if (!process_group::backend_available(dp_backend::gloo)) GTEST_SKIP() << "built without gloo's headers";
  auto shards = start_shards("trainer", 2);
  ASSERT_TRUE(wait_shards(shards, shard_deadline)) << "shards did not finish";
  for (int64_t r = 0; r < 2; ++r)
    EXPECT_TRUE(exited_zero(shards[r])) << "rank " << r << ": " << read_file(shards[r].log);
  remove_logs(shards);
}

TEST(DataParallel, ShardsOnTheirSlicesEqualOneProcessOnTheWholeBatch) {
  if (!process_group::backend_available(dp_backend::gloo)) GTEST_SKIP() << "built without gloo's headers";
  auto shards = start_shards("sliced", 2);
  ASSERT_TRUE(wait_shards(shards, shard_deadline)) << "shards did not finish";
  for (int64_t r = 0; r < 2; ++r)
    EXPECT_TRUE(exited_zero(shards[r])) << "rank " << r << ": " << read_file(shards[r].log);
  remove_logs(shards);
}

TEST(DataParallel, APeerThatDiesFailsTheAllReduce) {
  if (!process_group::backend_available(dp_backend::gloo)) GTEST_SKIP() << "built without gloo's headers";
  auto shards = start_shards("die", 2);
  ASSERT_TRUE(wait_shards(shards, shard_deadline));
  const auto log = read_file(shards[0].log);
  EXPECT_TRUE(exited_zero(shards[0])) << log;
  EXPECT_NE(log.find("all_reduce mean (gloo, rank 0 of 2) failed"), std::string::npos) << log;
  remove_logs(shards);
}

TEST(DataParallel, APeerThatHangsTimesOut) {
  if (!process_group::backend_available(dp_backend::gloo)) GTEST_SKIP() << "built without gloo's headers";
  auto shards = start_shards("hang", 2);
  // Only rank 0 must end by itself; rank 1 sleeps and is killed afterwards.
  ASSERT_TRUE(wait_shards(shards, shard_deadline, 0));
  const auto log = read_file(shards[0].log);
  EXPECT_TRUE(exited_zero(shards[0])) << log;
  EXPECT_NE(log.find("failed"), std::string::npos) << log;
  remove_logs(shards);
}

TEST(DataParallel, RendezvousWithoutPeersTimesOut) {
  if (!process_group::backend_available(dp_backend::gloo)) GTEST_SKIP() << "built without gloo's headers";
  const auto start = clock_type::now();
  auto pg = process_group::create(options_for(0, 2, free_port(), std::chrono::milliseconds(1500)));
  const auto waited = clock_type::now() - start;
  ASSERT_FALSE(pg);
  EXPECT_NE(pg.error().message.find("rendezvous failed"), std::string::npos) << pg.error().message;
  EXPECT_LT(waited, std::chrono::seconds(15));
}

TEST(DataParallel, WorldOfOneAndBadInput) {
  auto pg = process_group::create(options_for(0, 1, 0, std::chrono::seconds(1)));
  ASSERT_TRUE(pg) << pg.error().message;
  std::vector<torch::Tensor> grads{torch::full({3}, 2.0f)};
  ASSERT_TRUE((*pg)->all_reduce_mean(grads));
  EXPECT_EQ(grads[0][0].item<float>(), 2.0f);
  EXPECT_TRUE((*pg)->barrier());
  std::vector<torch::Tensor> ints{torch::ones({2}, torch::kInt64)};
  EXPECT_FALSE((*pg)->all_reduce_mean(ints));  // the mean of integers is not a gradient
  std::vector<torch::Tensor> undefined{torch::Tensor{}};
  EXPECT_FALSE((*pg)->all_reduce(undefined, reduce_op::sum));
  EXPECT_FALSE(process_group::create(options_for(2, 2, 0, std::chrono::seconds(1))));  // rank >= world
  EXPECT_FALSE(process_group::create(options_for(0, 0, 0, std::chrono::seconds(1))));
}

}  // namespace
}  // namespace caf_agent::learner

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--shard") return caf_agent::learner::run_shard(argc, argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
