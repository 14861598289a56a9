// Tests of the robust reward: the boundary table shared with the Python mirror, and the
// rules it encodes (5% margin, invalid times are failures).
#include "gpu_pool/reward.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>

namespace gp = caf_agent::gpu_pool;

namespace {

double parse_time(const nlohmann::json& j) {
  if (j.is_string()) {
    const auto s = j.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
  }
  return j.get<double>();
}

std::string source_dir() {
  const char* d = std::getenv("CAF_AGENT_SOURCE_DIR");
  return d ? d : ".";
}

}  // namespace

TEST(reward, shared_boundary_table_matches_python_mirror) {
  std::ifstream in(source_dir() + "/skills/eval_worker/caf_agent_eval/reward_cases.json");
  ASSERT_TRUE(in) << "reward_cases.json not found (set CAF_AGENT_SOURCE_DIR)";
  const auto doc = nlohmann::json::parse(in);
  ASSERT_GE(doc.at("cases").size(), 10u);
  for (const auto& c : doc.at("cases")) {
    gp::reward_input in_{c.at("correct").get<bool>(), parse_time(c.at("t")), parse_time(c.at("eager")),
                         parse_time(c.at("compile"))};
    EXPECT_EQ(gp::robust_reward(in_).reward, c.at("reward").get<int>()) << c.at("name");
  }
}

TEST(reward, exactly_five_percent_is_not_a_speedup) {
  EXPECT_FALSE(gp::beats(95.0, 100.0));
  EXPECT_TRUE(gp::beats(94.99, 100.0));
  EXPECT_FALSE(gp::beats(95.01, 100.0));
}

TEST(reward, tiers) {
  EXPECT_EQ(gp::robust_reward({true, 50, 100, 100}).reward, 3);
  EXPECT_EQ(gp::robust_reward({true, 50, 100, 52}).reward, 2);  // compile faster than eager
  EXPECT_EQ(gp::robust_reward({true, 100, 100, 100}).reward, 1);
  EXPECT_EQ(gp::robust_reward({false, 1, 100, 100}).reward, -1);
}

TEST(reward, invalid_times_fail_with_a_reason_naming_the_time) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto r = gp::robust_reward({true, nan, 1, 1});
  EXPECT_EQ(r.reward, -1);
  EXPECT_NE(r.reason.find("candidate"), std::string::npos);
  r = gp::robust_reward({true, 1, 0, 1});
  EXPECT_EQ(r.reward, -1);
  EXPECT_NE(r.reason.find("eager"), std::string::npos);
  r = gp::robust_reward({true, 1, 2, -3});
  EXPECT_EQ(r.reward, -1);
  EXPECT_NE(r.reason.find("compile"), std::string::npos);
}

TEST(reward, plain_speedup_for_ablations) {
  EXPECT_DOUBLE_EQ(gp::speedup_reward({true, 25, 100, 1}), 4.0);
  EXPECT_DOUBLE_EQ(gp::speedup_reward({false, 25, 100, 1}), -1.0);
  EXPECT_DOUBLE_EQ(gp::speedup_reward({true, 0, 100, 1}), -1.0);
}
