// observe/histogram.cpp: see histogram.hpp.
#include "observe/histogram.hpp"

#include <algorithm>

namespace caf_agent::observe {

size_t bucket_of(int64_t us) {
  auto it = std::lower_bound(bucket_bounds_us.begin(), bucket_bounds_us.end(), us);
  return static_cast<size_t>(it - bucket_bounds_us.begin());
}

void histogram::merge(const std::vector<int64_t>& other) {
  for (size_t i = 0; i < other.size() && i < bucket_count; ++i) {
    counts[i] += other[i];
    total += other[i];
  }
}

void histogram::merge(const histogram& other) {
  for (size_t i = 0; i < bucket_count; ++i) counts[i] += other.counts[i];
  total += other.total;
}

double histogram::quantile(double q) const {
  if (total <= 0) return 0;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  double seen = 0;
  for (size_t i = 0; i < bucket_count; ++i) {
    if (counts[i] == 0) continue;
    const double next = seen + static_cast<double>(counts[i]);
    if (next >= rank) {
      const double lo = i == 0 ? 0.0 : static_cast<double>(bucket_bounds_us[i - 1]);
      // Rationale: the overflow bucket has no upper bound; report its lower bound doubled
      // rather than inventing a tail.
      const double hi = i < bucket_bounds_us.size() ? static_cast<double>(bucket_bounds_us[i]) : 2 * lo;
      return lo + (hi - lo) * ((rank - seen) / static_cast<double>(counts[i]));
    }
    seen = next;
  }
  return static_cast<double>(bucket_bounds_us.back());
}

}  // namespace caf_agent::observe
