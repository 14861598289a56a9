// tests/rollout/task_set_test.cpp: a KernelBench checkout as a task set (level folders, ids,
// --levels, unusable files skipped with the reason) and the baseline report per level.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <unistd.h>

#include <gtest/gtest.h>

#include "rollout/baseline_report.hpp"
#include "rollout/tasks.hpp"

namespace fs = std::filesystem;
using namespace caf_agent;

namespace {

const char* const model = "import torch\nclass Model(torch.nn.Module):\n    pass\n";

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

fs::path checkout() {
  auto root = fs::temp_directory_path() / ("caf_task_set_" + std::to_string(::getpid()));
  fs::remove_all(root);
  write(root / "KernelBench" / "level1" / "19_ReLU.py", model);
  write(root / "KernelBench" / "level1" / "1_Matmul.py", model);
  write(root / "KernelBench" / "level2" / "5_Fused.py", model);
  write(root / "KernelBench" / "level3" / "7_Net.py", model);
  write(root / "KernelBench" / "level3" / "8_broken.py", "x = 1\n");
  return root;
}

}  // namespace

TEST(TaskSet, KernelBenchCheckoutWithLevels) {
  auto root = checkout();
  std::string error;
  auto all = rollout::load_task_set(root.string(), {}, error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_TRUE(all.kernelbench);
  ASSERT_EQ(all.tasks.size(), 4u);
  EXPECT_EQ(all.tasks[0].task_id, "level1/19_ReLU");
  EXPECT_EQ(all.tasks[0].level, 1);
  EXPECT_EQ(all.tasks[3].task_id, "level3/7_Net");
  EXPECT_EQ(all.tasks[3].level, 3);
  ASSERT_EQ(all.skipped.size(), 1u);
  EXPECT_NE(all.skipped[0].first.find("8_broken.py"), std::string::npos);
  EXPECT_EQ(all.skipped[0].second, "has no `class Model`");
  auto some = rollout::load_task_set((root / "KernelBench").string(), {1, 3}, error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(some.tasks.size(), 3u);
  for (auto& t : some.tasks) EXPECT_NE(t.level, 2);
  auto none = rollout::load_task_set(root.string(), {7}, error);
  EXPECT_TRUE(none.tasks.empty());
  EXPECT_EQ(error, "no task of level 7 in '" + root.string() + "' (levels found: 1,2,3)");
  fs::remove_all(root);
}

TEST(TaskSet, PlainDirectoryIsLoadTasks) {
  std::string error;
  auto set = rollout::load_task_set("no/such/dir", {}, error);
  EXPECT_EQ(error, "task directory 'no/such/dir' does not exist");
}

TEST(BaselineReport, PerLevelWithReasons) {
  auto row = [](const std::string& id, int level, messages::eval_status st, double eager, double compile,
                std::string reason) {
    rollout::baseline_row r;
    r.task.task_id = id;
    r.task.level = level;
    r.answered = true;
    r.result.status = st;
    r.result.eager_ms = eager;
    r.result.compile_ms = compile;
    r.result.reason = std::move(reason);
    return r;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  using messages::eval_status;
  std::vector<rollout::baseline_row> rows{
      row("level1/a", 1, eval_status::ok, 2.0, 1.0, "baseline on NVIDIA H200 (torch 2.11): eager 2 ms"),
      row("level1/b", 1, eval_status::ok, 8.0, 10.0, "baseline on NVIDIA H200 (torch 2.11): eager 8 ms"),
      row("level1/c", 1, eval_status::task_error, 0, 0, "task error: the task's output 0 does not depend"),
      row("level2/a", 2, eval_status::ok, 4.0, nan, "baseline on NVIDIA H200 (torch 2.11): torch.compile failed"),
  };
  rollout::baseline_row lost;
  lost.task.task_id = "level2/b";
  lost.task.level = 2;
  rows.push_back(lost);
  auto rep = rollout::make_baseline_report(rows);
  EXPECT_EQ(rep.device, "NVIDIA H200");
  auto& l1 = rep.by_level.at(1);
  EXPECT_EQ(l1.tasks, 3);
  EXPECT_EQ(l1.eager_measured, 2);
  EXPECT_EQ(l1.compile_measured, 2);
  EXPECT_EQ(l1.not_measured.at("task_error"), 1);
  EXPECT_DOUBLE_EQ(l1.eager_ms_median, 5.0);
  EXPECT_DOUBLE_EQ(l1.eager_ms_geomean, 4.0);
  EXPECT_NEAR(l1.eager_over_compile_geomean, std::sqrt(2.0 * 0.8), 1e-12);
  EXPECT_EQ(l1.compile_faster, 1);
  EXPECT_EQ(l1.compile_slower, 1);
  auto& l2 = rep.by_level.at(2);
  EXPECT_EQ(l2.eager_measured, 1);
  EXPECT_EQ(l2.compile_failed, 1);
  EXPECT_EQ(l2.not_measured.at("not_answered"), 1);
  EXPECT_EQ(rep.overall.tasks, 5);
  auto text = rollout::format_baseline_report(rep, rows);
  EXPECT_NE(text.find("baselines measured by the judge on NVIDIA H200"), std::string::npos) << text;
  EXPECT_NE(text.find("level1/c: task_error: task error: the task's output 0 does not depend"), std::string::npos);
  EXPECT_NE(text.find("level2/a: eager only: baseline on"), std::string::npos);
  EXPECT_NE(text.find("level2/b: not_answered: the run stopped before the pool answered"), std::string::npos);
  EXPECT_EQ(text.find("level1/a:"), std::string::npos);
  auto json = rollout::baseline_report_json(rep, rows);
  EXPECT_NE(json.find("\"compile_ms\": null"), std::string::npos) << json;
}
