#pragma once
/// observe/histogram.hpp: a fixed-bucket histogram of durations in microseconds.
///
/// Buckets follow a 1-2-5 series from 10 us to 1000 s, the same bounds everywhere, so
/// histograms of many actors, nodes and pools add up bucket by bucket and travel as a
/// plain vector of counts (messages::actor_kind_metrics::processing_buckets and others).

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace caf_agent::observe {

/// Upper bounds (inclusive) of the buckets in microseconds; one more bucket holds the rest.
inline constexpr std::array<int64_t, 25> bucket_bounds_us{
    10,       20,       50,       100,       200,       500,       1000,      2000,    5000,
    10000,    20000,    50000,    100000,    200000,    500000,    1000000,   2000000, 5000000,
    10000000, 20000000, 50000000, 100000000, 200000000, 500000000, 1000000000};

/// Number of buckets (the bounds and one for larger values).
inline constexpr size_t bucket_count = bucket_bounds_us.size() + 1;

/// The bucket a duration falls in.
size_t bucket_of(int64_t us);

/// A histogram; not thread-safe (owners lock or own it).
struct histogram {
  std::array<int64_t, bucket_count> counts{};
  int64_t total = 0;
  void add(int64_t us) {
    ++counts[bucket_of(us)];
    ++total;
  }
  void merge(const std::vector<int64_t>& other);
  void merge(const histogram& other);
  std::vector<int64_t> to_vector() const { return {counts.begin(), counts.end()}; }
  /// The q-quantile (0..1) in microseconds, interpolated inside its bucket; 0 when empty.
  double quantile(double q) const;
};

}  // namespace caf_agent::observe
