// tests/runtime/exit_latch_test.cpp: runtime::exit_latch tells a job that ended on its own
// (finish) from any other trigger (a signal, a lost peer) by a flag, not by its reason text;
// runtime::exit_deadline ends a process whose exit hangs after its work, with the work's code.
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

// A stuck exit (what CAF 0.17's actor_system destructor does when a detached actor's thread
// waits on its own actor) ends at the deadline with the code the work returned, and says why.
TEST(exit_deadline, a_stuck_exit_ends_with_the_works_code) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        {
          exit_deadline deadline{std::chrono::milliseconds(200)};
          deadline.exit_with(7);
        }
        std::this_thread::sleep_for(std::chrono::seconds(60));  // the hang
        std::exit(0);
      },
      ::testing::ExitedWithCode(7), "did not shut down within 200 ms");
}

// An exit that finishes in time is not cut short: the process ends with its own status.
TEST(exit_deadline, an_exit_in_time_keeps_its_own_status) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        {
          exit_deadline deadline{std::chrono::seconds(30)};
          deadline.exit_with(7);
        }
        std::exit(5);
      },
      ::testing::ExitedWithCode(5), "");
}

}  // namespace
}  // namespace caf_agent::runtime
