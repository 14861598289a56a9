// The learning-rate schedules against values worked out by hand.

#include "learner/lr_schedule.hpp"

#include <cmath>

#include <gtest/gtest.h>

namespace caf_agent::learner {
namespace {

TEST(LrSchedule, ConstantIsTheRateAtEveryStep) {
  lr_schedule s{.kind = lr_schedule_kind::constant, .lr = 2e-3};
  ASSERT_TRUE(s.validate());
  for (int64_t step : {0, 1, 99, 100000}) EXPECT_DOUBLE_EQ(s.at(step), 2e-3);
}

TEST(LrSchedule, PhasesInOrderAndTheLastHolds) {
  // [[3, 1e-2], [2, 3e-3], [1, 1e-3]]: steps 0-2 at 1e-2, 3-4 at 3e-3, 5 at 1e-3, then 1e-3.
  lr_schedule s{.kind = lr_schedule_kind::phases, .phases = {{3, 1e-2}, {2, 3e-3}, {1, 1e-3}}};
  ASSERT_TRUE(s.validate());
  const double want[] = {1e-2, 1e-2, 1e-2, 3e-3, 3e-3, 1e-3, 1e-3, 1e-3};
  for (int64_t i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(s.at(i), want[i]) << "step " << i;
  EXPECT_EQ(s.phase_steps(), 6);
}

TEST(LrSchedule, CosineWithWarmup) {
  // lr 1, warm-up 2 of 6 steps, min 0.1: steps 0, 1 -> 0.5, 1.0 (linear, starting above 0);
  // decay over 4 steps: progress 0, .25, .5, .75 -> 0.1 + 0.9 * (1 + cos(pi p)) / 2
  //   = 1.0, 0.1 + 0.45 * (1 + 0.70711) = 0.86820, 0.55, 0.1 + 0.45 * (1 - 0.70711) = 0.23180; then 0.1.
  lr_schedule s{.kind = lr_schedule_kind::cosine, .lr = 1.0, .warmup_steps = 2, .total_steps = 6, .min_lr = 0.1};
  ASSERT_TRUE(s.validate());
  const double want[] = {0.5, 1.0, 1.0, 0.868198, 0.55, 0.231802, 0.1, 0.1};
  for (int64_t i = 0; i < 8; ++i) EXPECT_NEAR(s.at(i), want[i], 1e-6) << "step " << i;
  // Without warm-up the first step is the peak.
  lr_schedule plain{.kind = lr_schedule_kind::cosine, .lr = 1.0, .total_steps = 4};
  EXPECT_DOUBLE_EQ(plain.at(0), 1.0);
  EXPECT_NEAR(plain.at(2), 0.5, 1e-12);
}

TEST(LrSchedule, BadSchedulesNameTheField) {
  auto message = [](const lr_schedule& s) { return s.validate() ? std::string{} : s.validate().error().message; };
  EXPECT_NE(message({.kind = lr_schedule_kind::phases}).find("phases is empty"), std::string::npos);
  EXPECT_NE(message({.kind = lr_schedule_kind::phases, .phases = {{0, 1e-3}}}).find("phase 1 has steps < 1"),
            std::string::npos);
  EXPECT_NE(message({.kind = lr_schedule_kind::phases, .phases = {{1, 1e-3}, {2, -1.0}}}).find("phase 2"),
            std::string::npos);
  EXPECT_NE(message({.kind = lr_schedule_kind::cosine, .lr = 1}).find("total_steps"), std::string::npos);
  EXPECT_NE(message({.kind = lr_schedule_kind::cosine, .lr = 1, .warmup_steps = 5, .total_steps = 4}).find("warmup"),
            std::string::npos);
  EXPECT_NE(message({.lr = NAN}).find("lr must be finite"), std::string::npos);
  EXPECT_FALSE(parse_lr_schedule_kind("linear"));
  EXPECT_NE(parse_lr_schedule_kind("linear").error().message.find("constant, phases, cosine"), std::string::npos);
  EXPECT_EQ(to_string(lr_schedule_kind::phases), "phases");
  EXPECT_EQ(parse_lr_schedule_kind("cosine").value(), lr_schedule_kind::cosine);
}

TEST(LrSchedule, ParsesPhasesText) {
  auto p = parse_lr_phases("450:1e-2,90:3e-3");
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0].first, 450);
  EXPECT_DOUBLE_EQ((*p)[1].second, 3e-3);
  EXPECT_FALSE(parse_lr_phases("450"));
  EXPECT_FALSE(parse_lr_phases("450:x"));
  EXPECT_FALSE(parse_lr_phases("4a:1e-3"));
  EXPECT_FALSE(parse_lr_phases(""));
}

}  // namespace
}  // namespace caf_agent::learner
