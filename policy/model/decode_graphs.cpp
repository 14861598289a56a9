// Shape legend: see decode_graphs.hpp.
#include "policy/model/decode_graphs.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

#ifdef CAF_AGENT_POLICY_CUDA_GRAPHS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace caf_agent::policy {
namespace {

// Rationale: attended keys are rounded up (decode_key_bucket) so a sequence needs a new graph
// only now and then; rows to powers of two. Extra rows and keys are masked, costing little.
constexpr int64_t key_bucket = 256;

// Paged, flash: the runs of `rows` padding rows, `width` a row: one run of the scratch block `pad`
// (their key at its position 0), the rest empty.
std::vector<int64_t> padding_runs(int64_t rows, int64_t width, int64_t pad) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t l = 0; l < width; ++l) out.insert(out.end(), {pad, 0, l == 0 ? 1 : 0});
  return out;
}

int64_t round_rows(int64_t rows, int64_t slots) {
  int64_t b = 1;
  while (b < rows) b *= 2;
  return std::min(b, slots);
}

}  // namespace

int64_t decode_key_bucket(int64_t keys, int64_t capacity) {
  return std::min((keys + key_bucket - 1) / key_bucket * key_bucket, capacity);
}

int64_t decode_table_width(int64_t width, int64_t block_size) {
  const int64_t step = std::max<int64_t>(1, key_bucket / std::max<int64_t>(block_size, 1));
  return (width + step - 1) / step * step;
}

#ifdef CAF_AGENT_POLICY_CUDA_GRAPHS

struct decode_graphs::state {
  struct graph {
    at::cuda::CUDAGraph cuda;
    torch::Tensor inputs_2b;  // tokens and positions, read by the graph
    torch::Tensor tables_bm;  // paged: the rows' block tables, read by the graph
    torch::Tensor runs_br3;   // paged, flash: the tables' runs (decoder::decode), read by the graph
    torch::Tensor packed;     // paged: inputs_2b, tables_bm and runs_br3 end to end (one copy a step)
    torch::Tensor logits_bv;  // written by the graph
  };
  const decoder* model;
  kv_cache* cache;
  at::cuda::MempoolId_t pool = at::cuda::graph_pool_handle();
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::unique_ptr<graph>> graphs;  // (rows, keys or width, runs)
  std::optional<c10::cuda::CUDAStream> side;  // every capture's stream (cuBLAS keeps a workspace per stream)
  std::set<int64_t> warmed_rows;              // row counts an eager warm-up has run
  double capture_seconds = 0;

  // The graph of b rows attending `keys` keys, captured on first use: one a key bucket, or one
  // for every key count where the step's kernels do not depend on it (decoder::keys_free_decode).
  graph& graph_for(int64_t b, int64_t keys) {
    const int64_t rows = round_rows(b, cache->slots());
    const int64_t bucket =
        model->keys_free_decode(*cache) ? cache->capacity() : decode_key_bucket(keys, cache->capacity());
    auto it = graphs.find({rows, bucket, 0});
    return it != graphs.end() ? *it->second : capture(rows, bucket, 0);
  }

  // Paged: the graph of b rows with block tables of `width` blocks in `runs` runs (flash over a
  // cache of the model's dtype, decoder::decode_takes_runs; else 0), captured on first use.
  graph& paged_graph_for(int64_t b, int64_t width, int64_t runs) {
    const int64_t rows = round_rows(b, std::numeric_limits<int64_t>::max());
    const int64_t m = decode_table_width(width, cache->capacity());
    auto it = graphs.find({rows, m, runs});
    return it != graphs.end() ? *it->second : capture(rows, m, runs);
  }

  // `keys`: the slots' attended-key bucket, or paged the table width; `runs`: paged, flash: the
  // block runs a row.
  graph& capture(int64_t rows, int64_t keys, int64_t runs) {
    auto g = std::make_unique<graph>();
    // Warm-up and capture write keys at the cache's last position of every row's slot, which
    // no sequence uses (the engine ends a sequence before its keys reach it), so neither a
    // running sequence nor a kept prefix (engine_options::prefix_cache) is disturbed. Paged:
    // at position 0 of the last block, which the engine never hands out.
    const int64_t scratch = cache->paged ? 0 : cache->capacity() - 1;
    auto inputs_2b = torch::stack({torch::zeros({rows}, torch::kInt64), torch::full({rows}, scratch, torch::kInt64)});
    const int64_t pad = cache->slots() - 1;
    if (cache->paged) {
      // One device buffer, so that a step's inputs arrive in one copy (decode()).
      auto parts = std::vector<torch::Tensor>{inputs_2b.view({-1}), torch::full({rows * keys}, pad, torch::kInt64)};
      if (runs > 0) parts.push_back(torch::tensor(padding_runs(rows, runs, pad)));
      g->packed = torch::cat(parts).to(model->device());
      g->inputs_2b = g->packed.narrow(0, 0, 2 * rows).view({2, rows});
      g->tables_bm = g->packed.narrow(0, 2 * rows, rows * keys).view({rows, keys});
      if (runs > 0) g->runs_br3 = g->packed.narrow(0, rows * (2 + keys), rows * runs * 3).view({rows, runs, 3});
    } else {
      g->inputs_2b = inputs_2b.to(model->device());
    }
    const auto step = [&] {
      return cache->paged ? model->decode(g->inputs_2b[0], g->inputs_2b[1], keys * cache->capacity(), *cache,
                                          g->tables_bm, g->runs_br3)
                          : model->decode(g->inputs_2b[0], g->inputs_2b[1], keys, *cache);
    };
    if (!side) side = at::cuda::getStreamFromPool();
    c10::cuda::device_synchronize();  // capture is rare: order it simply against earlier work
    // Timed from here: the capture's own cost (its warm-up step, the capture, the instantiation),
    // not the queued steps the synchronize waited for. Rationale: timed from before it, the cached
    // agent workload's 95 captures read 3.94 s on an H100, yet capturing 3 instead took only 0.23 s
    // off the run (bench/results/2026-12-06-policy-h100-keys-free-graphs.md): with overlapped
    // decoding most of that was device work queued before the capture.
    const auto start = std::chrono::steady_clock::now();
    {
      at::cuda::CUDAStreamGuard guard(*side);
      // One eager warm-up per row count: lazy initialisation (cuBLAS handles, the workspace of
      // this stream) must not happen inside a capture. Another key bucket of the same rows runs
      // the same kernels but flash's grid (and maybe its split-KV variant, which drivers of CUDA
      // 12.3 and later load during a capture), so it needs none: a warm-up is an eager step,
      // ~6 ms of a 64-row capture's ~12 ms (bench/results/2026-12-04-policy-h200-shares-gemv.md).
      if (warmed_rows.insert(rows).second) step();
      g->cuda.capture_begin(pool);
      g->logits_bv = step();
      g->cuda.capture_end();
    }
    c10::cuda::device_synchronize();
    capture_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return *graphs.emplace(std::tuple{rows, keys, runs}, std::move(g)).first->second;
  }
};

bool decode_graphs::supported(torch::Device device) {
  return device.is_cuda();
}

decode_graphs::decode_graphs(const decoder& model, kv_cache& cache) : state_(std::make_unique<state>()) {
  state_->model = &model;
  state_->cache = &cache;
}

torch::Tensor decode_graphs::decode(const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions,
                                    int64_t keys) {
  auto& s = *state_;
  const auto b = static_cast<int64_t>(tokens.size());
  auto& g = s.graph_for(b, keys);
  const int64_t rows = g.inputs_2b.size(1);
  // Padding rows decode token 0 at the unused last position of their slot (see capture).
  auto host_2b = torch::zeros({2, rows}, torch::kInt64);
  host_2b[1].fill_(s.cache->capacity() - 1);
  std::copy(tokens.begin(), tokens.end(), host_2b[0].data_ptr<int64_t>());
  std::copy(positions.begin(), positions.end(), host_2b[1].data_ptr<int64_t>());
  g.inputs_2b.copy_(host_2b.pin_memory(), /*non_blocking=*/true);
  g.cuda.replay();
  return g.logits_bv.narrow(0, 0, b);
}

torch::Tensor decode_graphs::decode(const torch::Tensor& tokens_b, const std::vector<int64_t>& positions,
                                    int64_t keys) {
  auto& s = *state_;
  const auto b = tokens_b.size(0);
  auto& g = s.graph_for(b, keys);
  const int64_t rows = g.inputs_2b.size(1);
  auto host_1b = torch::full({rows}, s.cache->capacity() - 1, torch::kInt64);
  std::copy(positions.begin(), positions.end(), host_1b.data_ptr<int64_t>());
  g.inputs_2b[1].copy_(host_1b.pin_memory(), /*non_blocking=*/true);
  g.inputs_2b[0].narrow(0, 0, b).copy_(tokens_b, /*non_blocking=*/true);
  if (rows > b) g.inputs_2b[0].narrow(0, b, rows - b).zero_();
  g.cuda.replay();
  return g.logits_bv.narrow(0, 0, b);
}

// A paged step's replay: tokens (or, when `tokens_b` is set, those on the device), positions,
// tables and runs copied into the graph's inputs, then the graph replayed.
torch::Tensor decode_graphs::replay_paged(const std::vector<int64_t>& tokens, const torch::Tensor* tokens_b,
                                          const std::vector<int64_t>& positions,
                                          const std::vector<const std::vector<int64_t>*>& tables) {
  auto& s = *state_;
  const auto b = static_cast<int64_t>(tokens.size());
  size_t width = 1;
  for (const auto* blocks : tables) width = std::max(width, blocks->size());
  auto& g = s.paged_graph_for(b, static_cast<int64_t>(width),
                              s.model->decode_takes_runs(*s.cache) ? paged_block_run_count(tables) : 0);
  const int64_t rows = g.inputs_2b.size(1), m = g.tables_bm.size(1);
  const int64_t r = g.runs_br3.defined() ? g.runs_br3.size(1) : 0, pad = s.cache->slots() - 1;
  // Tokens, positions, tables and runs in one copy; padding rows decode token 0 at position 0 of
  // the scratch block, and tables are padded with it (see capture).
  auto host = torch::zeros({rows * (2 + m + 3 * r)}, torch::kInt64);
  int64_t* p = host.data_ptr<int64_t>();
  std::copy(tokens.begin(), tokens.end(), p);
  std::copy(positions.begin(), positions.end(), p + rows);
  std::fill(p + 2 * rows, p + rows * (2 + m), pad);
  for (size_t i = 0; i < tables.size(); ++i) std::copy(tables[i]->begin(), tables[i]->end(), p + 2 * rows + i * m);
  if (r > 0) {
    auto runs = paged_block_runs(tables, s.cache->capacity(), r, pad);
    const auto padding = padding_runs(rows - b, r, pad);
    runs.insert(runs.end(), padding.begin(), padding.end());
    std::copy(runs.begin(), runs.end(), p + rows * (2 + m));
  }
  g.packed.copy_(host.pin_memory(), /*non_blocking=*/true);
  if (tokens_b) g.packed.narrow(0, 0, b).copy_(*tokens_b, /*non_blocking=*/true);
  g.cuda.replay();
  return g.logits_bv.narrow(0, 0, b);
}

torch::Tensor decode_graphs::decode(const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions,
                                    const std::vector<const std::vector<int64_t>*>& tables) {
  return replay_paged(tokens, nullptr, positions, tables);
}

torch::Tensor decode_graphs::decode(const torch::Tensor& tokens_b, const std::vector<int64_t>& positions,
                                    const std::vector<const std::vector<int64_t>*>& tables) {
  return replay_paged(std::vector<int64_t>(static_cast<size_t>(tokens_b.size(0)), 0), &tokens_b, positions, tables);
}

int64_t decode_graphs::captures() const {
  return static_cast<int64_t>(state_->graphs.size());
}
double decode_graphs::capture_seconds() const {
  return state_->capture_seconds;
}

#else  // Built without CUDA: the engine never constructs decode_graphs.

struct decode_graphs::state {};

bool decode_graphs::supported(torch::Device) {
  return false;
}

decode_graphs::decode_graphs(const decoder&, kv_cache&) {
  throw std::logic_error("decode_graphs: this build has no CUDA graph support");
}

torch::Tensor decode_graphs::decode(const std::vector<int64_t>&, const std::vector<int64_t>&, int64_t) {
  throw std::logic_error("decode_graphs: this build has no CUDA graph support");
}

torch::Tensor decode_graphs::decode(const torch::Tensor&, const std::vector<int64_t>&, int64_t) {
  throw std::logic_error("decode_graphs: this build has no CUDA graph support");
}

torch::Tensor decode_graphs::decode(const std::vector<int64_t>&, const std::vector<int64_t>&,
                                    const std::vector<const std::vector<int64_t>*>&) {
  throw std::logic_error("decode_graphs: this build has no CUDA graph support");
}

torch::Tensor decode_graphs::decode(const torch::Tensor&, const std::vector<int64_t>&,
                                    const std::vector<const std::vector<int64_t>*>&) {
  throw std::logic_error("decode_graphs: this build has no CUDA graph support");
}

int64_t decode_graphs::captures() const {
  return 0;
}
double decode_graphs::capture_seconds() const {
  return 0;
}

#endif

decode_graphs::~decode_graphs() = default;

}  // namespace caf_agent::policy
