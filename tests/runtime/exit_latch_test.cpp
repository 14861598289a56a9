// tests/runtime/exit_latch_test.cpp: runtime::exit_latch tells a job that ended on its own
// (finish) from any other trigger (a signal, a lost peer) by a flag, not by its reason text.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "runtime/process.hpp"

namespace caf_agent::runtime {
namespace {

TEST(exit_latch, finish_marks_the_job_done_and_keeps_its_reason) {
  exit_latch latch;
  EXPECT_FALSE(latch.triggered());
  latch.finish(1, "run finished");
  EXPECT_TRUE(latch.triggered());
  EXPECT_TRUE(latch.finished());
  EXPECT_EQ(latch.exit_code(), 1);
  EXPECT_EQ(latch.reason(), "run finished");
}

TEST(exit_latch, a_signal_first_is_not_a_finish_whatever_its_text) {
  exit_latch latch;
  latch.trigger(0, "run finished");  // text alone decides nothing
  latch.finish(0, "run finished");   // too late: the first trigger stands
  EXPECT_FALSE(latch.finished());
  EXPECT_EQ(latch.exit_code(), 0);
}

TEST(exit_latch, the_first_trigger_wins_and_wakes_a_waiter) {
  exit_latch latch;
  std::thread t{[&] { latch.finish(3, "training finished"); }};
  EXPECT_TRUE(latch.wait_for(std::chrono::seconds(10)));
  t.join();
  latch.trigger(130, "SIGTERM");
  EXPECT_TRUE(latch.finished());
  EXPECT_EQ(latch.exit_code(), 3);
  EXPECT_EQ(latch.reason(), "training finished");
}

}  // namespace
}  // namespace caf_agent::runtime
