#pragma once
// Clocks and the one statistic the benchmark reports: the median.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::bench {

/// CLOCK_MONOTONIC in nanoseconds (std::chrono::steady_clock on Linux). Why monotonic: it is one
/// clock for every process of the machine, so a parent's spawn time and a child's times compare.
inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline double ms_between(std::int64_t from_ns, std::int64_t to_ns) {
  return static_cast<double>(to_ns - from_ns) / 1e6;
}

/// The median (mean of the middle two for an even count); 0 for no values.
double median(std::vector<double> values);

/// `value` with `decimals` digits after the point; "-" for NaN.
std::string fixed(double value, int decimals);

/// "yes" / "no".
inline std::string yes_no(bool value) { return value ? "yes" : "no"; }

}  // namespace kiln::bench
