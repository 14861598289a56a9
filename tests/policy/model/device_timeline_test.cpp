// Unit tests of read_device_timeline (policy/model/device_timeline.hpp): what each kernel adds to
// the device's timeline when programmatic launch overlaps kernels, and the gaps between them.
#include <gtest/gtest.h>

#include "policy/model/device_timeline.hpp"

using caf_agent::policy::device_event;
using caf_agent::policy::read_device_timeline;

TEST(device_timeline, an_overlapping_kernel_adds_only_what_extends_the_one_before) {
  // Kernel 0 runs 0-10 us; kernel 1 starts at 4 us (programmatic launch: waiting) and ends at 15;
  // kernel 0 again 15-20 after a launch gap of 0; kernel 1 again from 30 (a 10 us host gap) to 31.
  const auto t =
      read_device_timeline({{30'000, 31'000, 1}, {0, 10'000, 0}, {4'000, 15'000, 1}, {15'000, 20'000, 0}}, 2);
  EXPECT_DOUBLE_EQ(t.added_us[0], 10.0 + 5.0);
  EXPECT_DOUBLE_EQ(t.added_us[1], 5.0 + 1.0);  // not its 11 + 1 us of profiled duration
  EXPECT_DOUBLE_EQ(t.span_us, 21.0);
  EXPECT_EQ(t.long_gaps, 1);
  EXPECT_DOUBLE_EQ(t.long_gap_us, 10.0);
  EXPECT_EQ(t.short_gaps, 0);
}

TEST(device_timeline, a_covered_event_adds_nothing_and_short_gaps_are_counted_apart) {
  // Kernel 1 lies inside kernel 0 (0-10 us); kernel 2 starts 2 us after kernel 0 ends.
  const auto t = read_device_timeline({{0, 10'000, 0}, {3'000, 6'000, 1}, {12'000, 13'000, 2}}, 3);
  EXPECT_DOUBLE_EQ(t.added_us[1], 0.0);
  EXPECT_DOUBLE_EQ(t.added_us[2], 1.0);
  EXPECT_EQ(t.short_gaps, 1);
  EXPECT_DOUBLE_EQ(t.short_gap_us, 2.0);
  EXPECT_DOUBLE_EQ(t.longest_gap_us, 2.0);
  EXPECT_DOUBLE_EQ(t.span_us, 11.0);
}

TEST(device_timeline, no_events_is_an_empty_timeline) {
  const auto t = read_device_timeline({}, 2);
  EXPECT_EQ(t.added_us, (std::vector<double>{0.0, 0.0}));
  EXPECT_DOUBLE_EQ(t.span_us, 0.0);
  EXPECT_EQ(t.short_gaps + t.long_gaps, 0);
}
