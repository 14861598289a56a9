// sandbox_bench: latency of one sandboxed Bash call (`true`) and of Read/Edit/Grep.
// Usage: sandbox_bench [bash_calls=300] [file_calls=2000]. Prints a markdown table.
#include "base/remove_tree.hpp"
#include "sandbox/episode_sandbox.hpp"

#include <fmt/format.h>

#include <sys/stat.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

namespace sb = caf_agent::sandbox;

namespace {

struct stats {
  double p50, p90, p99, mean;
};

stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto q = [&](double f) { return v[static_cast<std::size_t>(f * static_cast<double>(v.size() - 1))]; };
  double sum = 0;
  for (double x : v) sum += x;
  return {q(0.5), q(0.9), q(0.99), sum / static_cast<double>(v.size())};
}

std::filesystem::path make_workspace(const std::filesystem::path& root, const char* name) {
  const auto ws = root / name;
  std::filesystem::create_directories(ws / "kernels");
  std::ofstream(ws / "model.py")
      << "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n";
  for (int i = 0; i < 20; ++i) {
    std::ofstream f(ws / "kernels" / fmt::format("k{}.cu", i));
    for (int l = 0; l < 50; ++l)
      f << fmt::format("__global__ void k{}_{}(float* x) {{ x[threadIdx.x] *= {}; }}\n", i, l, l);
  }
  return ws;
}

/// Times `n` calls of one tool; returns per-call wall-clock ms as measured by the caller.
std::vector<double> time_calls(sb::episode_sandbox& s, int n, const std::string& tool, const nlohmann::json& args) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = s.execute({"b", tool, args});
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (r.status != sb::tool_status::ok) {
      fmt::print(stderr, "{} failed: {}\n", tool, r.output);
      std::exit(1);
    }
  }
  return ms;
}

void row(const char* name, const stats& s, const char* target) {
  fmt::print("| {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {} |\n", name, s.p50, s.p90, s.p99, s.mean, target);
}

/// Which containment an arm has (the A/B rows).
enum class arm { deployed, no_cgroup_no_cap, cgroup_only };

std::unique_ptr<sb::episode_sandbox> make(const std::filesystem::path& ws, sb::isolation_kind isolation,
                                          arm a = arm::deployed) {
  sb::sandbox_config c;
  c.workspace = ws;
  c.isolation = isolation;
  if (a != arm::deployed) c.workspace_bytes = 0;
  if (a == arm::no_cgroup_no_cap) c.cgroup = sb::cgroup_policy::off;
  c.protected_paths = {"model.py"};
  c.require_read_before_edit = false;
  auto r = sb::episode_sandbox::create(c);
  if (!r.sandbox) {
    fmt::print(stderr, "cannot create sandbox: {}\n", r.error);
    std::exit(1);
  }
  return std::move(r.sandbox);
}

}  // namespace

int main(int argc, char** argv) {
  const int bash_calls = argc > 1 ? std::atoi(argv[1]) : 300;
  const int file_calls = argc > 2 ? std::atoi(argv[2]) : 2000;
  std::string tmpl = (std::filesystem::temp_directory_path() / "caf_sbx_bench_XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return 1;
  ::chmod(tmpl.c_str(), 0711);
  const std::filesystem::path root(tmpl);
  auto bw = make(make_workspace(root, "bwrap"), sb::isolation_kind::bwrap);
  auto none = make(make_workspace(root, "none"), sb::isolation_kind::none);
  auto bw_plain = make(make_workspace(root, "plain"), sb::isolation_kind::bwrap, arm::no_cgroup_no_cap);
  auto bw_cg = make(make_workspace(root, "cgroup"), sb::isolation_kind::bwrap, arm::cgroup_only);
  time_calls(*bw, 10, "Bash", {{"command", "true"}});  // warm-up: page cache, probe
  time_calls(*bw_plain, 10, "Bash", {{"command", "true"}});
  // Interleaved A/B, so both arms see the same machine load: with and without the cgroup.
  std::vector<double> with_cg, without_cg, cg_only;
  for (int i = 0; i < bash_calls; ++i) {
    with_cg.push_back(time_calls(*bw, 1, "Bash", {{"command", "true"}}).front());
    without_cg.push_back(time_calls(*bw_plain, 1, "Bash", {{"command", "true"}}).front());
    cg_only.push_back(time_calls(*bw_cg, 1, "Bash", {{"command", "true"}}).front());
  }
  fmt::print("| operation | p50 ms | p90 ms | p99 ms | mean ms | target |\n|---|---|---|---|---|---|\n");
  row("Bash `true`, bwrap sandbox (cgroup + workspace cap, as deployed)", summarize(with_cg), "p50 <= 20 ms");
  row("Bash `true`, bwrap sandbox, cgroup, no workspace cap (interleaved)", summarize(cg_only), "A/B");
  row("Bash `true`, bwrap sandbox, no cgroup, no cap (interleaved)", summarize(without_cg), "A/B");
  row("Bash `true`, isolation=none (rlimits, uid, no namespaces)",
      summarize(time_calls(*none, bash_calls, "Bash", {{"command", "true"}})), "breakdown");
  row("Read model.py", summarize(time_calls(*bw, file_calls, "Read", {{"file_path", "model.py"}})), "p50 < 1 ms");
  row("Edit kernels/k3.cu (toggle)", summarize([&] {
        std::vector<double> ms;
        for (int i = 0; i < file_calls; ++i) {
          const bool even = i % 2 == 0;
          auto v = time_calls(*bw, 1, "Edit",
                              {{"file_path", "kernels/k3.cu"},
                               {"old_string", even ? "*= 7;" : "*= 77;"},
                               {"new_string", even ? "*= 77;" : "*= 7;"}});
          ms.push_back(v.front());
        }
        return ms;
      }()),
      "p50 < 1 ms");
  row("Grep `threadIdx` (20 files, 1000 lines)",
      summarize(time_calls(*bw, file_calls, "Grep", {{"pattern", "threadIdx"}})), "p50 < 1 ms");
  row("Glob `**/*.cu`", summarize(time_calls(*bw, file_calls, "Glob", {{"pattern", "**/*.cu"}})), "-");
  fmt::print("\nmetrics JSON (bwrap sandbox): {}\n", bw->metrics().to_json()["Bash"].dump());
  fmt::print("containment (bwrap sandbox): {}\n", bw->containment().dump());
  bw.reset();
  bw_plain.reset();
  bw_cg.reset();
  none.reset();
  caf_agent::base::remove_tree(std::filesystem::path(root).string());
  return 0;
}
