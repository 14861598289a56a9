// 200 episodes start and end; afterwards no process and no workspace of theirs remains.
#include "proc_scan.hpp"
#include "sandbox_test_util.hpp"

#include <chrono>
#include <set>

namespace caf_agent::sandbox::test {
namespace {

TEST(churn_test, two_hundred_episodes_leave_no_process_or_workspace) {
  const auto root = make_temp_root();
  const std::string marker = "sleep 1004." + std::to_string(::getpid());
  std::set<int> uids;
  const auto t0 = std::chrono::steady_clock::now();
  // Rationale: 10 alive at once resembles a rollout node's overlap without starving 2 cores.
  constexpr int kEpisodes = 200, kConcurrent = 10;
  std::vector<std::unique_ptr<episode_sandbox>> live;
  for (int i = 0; i < kEpisodes; ++i) {
    const auto ws = root / ("ep" + std::to_string(i));
    std::filesystem::create_directories(ws);
    put_file(ws / "model.py", "x = 1\n");
    sandbox_config c;
    c.workspace = ws;
    c.protected_paths = {"model.py"};
    auto r = episode_sandbox::create(c);
    ASSERT_TRUE(r.sandbox) << r.error;
    auto& sb = *r.sandbox;
    auto out = sb.execute({"1", "Bash", {{"command", "echo ep" + std::to_string(i) + " > out.txt; cat out.txt"}}});
    ASSERT_EQ(out.output, "ep" + std::to_string(i) + "\n");
    if (i % 4 == 0) sb.execute({"2", "Bash", {{"command", marker}, {"run_in_background", true}}});
    if (i % 8 == 0) sb.execute({"3", "Bash", {{"command", "setsid " + marker + " > /dev/null 2>&1 &"}}});
    if (sb.host_uid() >= 0) uids.insert(sb.host_uid());
    live.push_back(std::move(r.sandbox));
    if (live.size() >= static_cast<std::size_t>(kConcurrent)) live.erase(live.begin());
  }
  live.clear();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(pids_with_cmdline(marker).empty()) << "background processes survived their episode";
  for (int uid : uids) EXPECT_TRUE(pids_of_uid(uid).empty()) << "processes of uid " << uid << " remain";
  std::size_t leftover = 0;
  for (const auto& e : std::filesystem::directory_iterator(root)) leftover += e.is_directory() ? 1 : 0;
  EXPECT_EQ(leftover, 0u) << "workspaces were not removed";
  EXPECT_LT(secs, 60.0);
  std::printf("200 episodes in %.1f s\n", secs);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace caf_agent::sandbox::test
