#include "zeus/monitor/held_series.hpp"

#include <algorithm>
#include <iterator>

#include "zeus/common/units.hpp"

namespace zeus::monitor {

namespace {

double seconds(std::int64_t ns) {
  return units::seconds_from_nanoseconds(ns);
}

}  // namespace

HeldSeries::HeldSeries(std::size_t max_rows, OverflowPolicy policy)
    : max_rows_(std::max<std::size_t>(1, max_rows)),
      max_spans_(policy == OverflowPolicy::kCompact ? max_rows_ / 2 : 0),
      policy_(policy) {}

bool HeldSeries::full() const {
  return policy_ == OverflowPolicy::kError && rows() >= max_rows_;
}

bool HeldSeries::push(std::int64_t time_ns, double value) {
  if ((!readings_.empty() && time_ns < readings_.back().time_ns) || full()) {
    return false;
  }
  double integral = 0.0;
  if (readings_.empty()) {
    first_value_ = value;
  } else {
    const Reading& last = readings_.back();
    integral = last.integral + last.value * seconds(time_ns - last.time_ns);
  }
  if (max_spans_ == 0 && readings_.size() >= max_rows_) {
    readings_.pop_front();  // kDropOldest, or a bound of one row
    ++dropped_;
  }
  readings_.push_back({time_ns, value, integral});
  // Each pass moves one reading into the spans; merging halves them. Both leave at least one
  // exact reading, and the rows fit again once the spans are at most half the bound.
  while (max_spans_ > 0 && rows() > max_rows_ && readings_.size() > 1) {
    compact_oldest();
    if (spans_.size() > max_spans_) {
      merge_spans();
    }
  }
  return true;
}

void HeldSeries::compact_oldest() {
  const Reading oldest = readings_.front();
  readings_.pop_front();
  if (spans_.empty() || oldest.time_ns - spans_.back().start_ns >= span_target_ns_) {
    spans_.push_back({oldest.time_ns, oldest.integral, oldest.value, oldest.value});
    return;
  }
  Span& last = spans_.back();
  last.low = std::min(last.low, oldest.value);
  last.high = std::max(last.high, oldest.value);
}

void HeldSeries::merge_spans() {
  std::deque<Span> merged;
  for (std::size_t i = 0; i < spans_.size(); i += 2) {
    Span span = spans_[i];
    if (i + 1 < spans_.size()) {
      span.low = std::min(span.low, spans_[i + 1].low);
      span.high = std::max(span.high, spans_[i + 1].high);
    }
    merged.push_back(span);
  }
  spans_.swap(merged);
  const std::int64_t covered_ns = readings_.front().time_ns - spans_.front().start_ns;
  span_target_ns_ = covered_ns / static_cast<std::int64_t>(spans_.size());
}

std::int64_t HeldSeries::span_end_ns(std::size_t index) const {
  return index + 1 < spans_.size() ? spans_[index + 1].start_ns : readings_.front().time_ns;
}

double HeldSeries::span_end_integral(std::size_t index) const {
  return index + 1 < spans_.size() ? spans_[index + 1].integral : readings_.front().integral;
}

std::optional<HeldPoint> HeldSeries::last() const {
  if (readings_.empty()) {
    return std::nullopt;
  }
  return HeldPoint{readings_.back().time_ns, readings_.back().value, 0};
}

HeldIntegral HeldSeries::integral_inside(std::int64_t time_ns) const {
  if (!spans_.empty() && time_ns < readings_.front().time_ns) {
    const std::size_t index = span_index(time_ns);
    const Span& span = spans_[index];
    const double length_s = seconds(span_end_ns(index) - span.start_ns);
    if (!(length_s > 0.0)) {
      return {span.integral, 0.0};
    }
    // The mean held over the span is exact at its edges; inside, the readings' extremes bound
    // how far the true integral can be from the straight line between them.
    const double into_s = seconds(time_ns - span.start_ns);
    const double total = span_end_integral(index) - span.integral;
    return {span.integral + total * into_s / length_s,
            (span.high - span.low) * into_s * (length_s - into_s) / length_s};
  }
  const auto after = std::upper_bound(
      readings_.begin(), readings_.end(), time_ns,
      [](std::int64_t time, const Reading& reading) { return time < reading.time_ns; });
  const Reading& reading = *std::prev(after);
  return {reading.integral + reading.value * seconds(time_ns - reading.time_ns), 0.0};
}

std::optional<HeldIntegral> HeldSeries::integral_to(std::int64_t time_ns) const {
  if (readings_.empty()) {
    return std::nullopt;
  }
  const bool compacted = !spans_.empty();
  const std::int64_t first_ns = compacted ? spans_.front().start_ns : readings_.front().time_ns;
  if (time_ns < first_ns) {
    // Before the first row, its reading held backwards.
    const double base = compacted ? spans_.front().integral : readings_.front().integral;
    const double value = compacted ? first_value_ : readings_.front().value;
    return HeldIntegral{base + value * seconds(time_ns - first_ns), 0.0};
  }
  return integral_inside(time_ns);
}

std::optional<HeldIntegral> HeldSeries::integral(std::int64_t start_ns, std::int64_t end_ns) const {
  if (readings_.empty() || end_ns < start_ns ||
      (dropped_ > 0 && start_ns < readings_.front().time_ns)) {
    return std::nullopt;
  }
  const HeldIntegral start = *integral_to(start_ns);
  const HeldIntegral end = *integral_to(end_ns);
  return HeldIntegral{end.value - start.value, end.bound + start.bound};
}

std::optional<HeldPoint> HeldSeries::at(std::int64_t time_ns) const {
  if (readings_.empty()) {
    return std::nullopt;
  }
  if (!spans_.empty() && time_ns < readings_.front().time_ns) {
    if (time_ns < spans_.front().start_ns) {
      return std::nullopt;
    }
    return span_point(span_index(time_ns));
  }
  const auto after = std::upper_bound(
      readings_.begin(), readings_.end(), time_ns,
      [](std::int64_t time, const Reading& reading) { return time < reading.time_ns; });
  if (after == readings_.begin()) {
    return std::nullopt;
  }
  return HeldPoint{std::prev(after)->time_ns, std::prev(after)->value, 0};
}

std::size_t HeldSeries::span_index(std::int64_t time_ns) const {
  const auto after =
      std::upper_bound(spans_.begin(), spans_.end(), time_ns,
                       [](std::int64_t time, const Span& span) { return time < span.start_ns; });
  return static_cast<std::size_t>(std::distance(spans_.begin(), after) - 1);
}

HeldPoint HeldSeries::span_point(std::size_t index) const {
  const Span& span = spans_[index];
  const std::int64_t length_ns = span_end_ns(index) - span.start_ns;
  const double mean =
      length_ns > 0 ? (span_end_integral(index) - span.integral) / seconds(length_ns) : span.high;
  return {span.start_ns, mean, length_ns};
}

std::vector<HeldPoint> HeldSeries::points(std::optional<std::int64_t> start_ns,
                                          std::optional<std::int64_t> end_ns) const {
  const auto inside = [&](std::int64_t time_ns) {
    return (!start_ns || time_ns >= *start_ns) && (!end_ns || time_ns <= *end_ns);
  };
  std::vector<HeldPoint> result;
  for (std::size_t i = 0; i < spans_.size(); ++i) {
    if (inside(spans_[i].start_ns)) {
      result.push_back(span_point(i));
    }
  }
  for (const Reading& reading : readings_) {
    if (inside(reading.time_ns)) {
      result.push_back({reading.time_ns, reading.value, 0});
    }
  }
  return result;
}

std::optional<std::int64_t> HeldSeries::exact_since_ns() const {
  if (readings_.empty() || (spans_.empty() && dropped_ == 0)) {
    return std::nullopt;
  }
  return readings_.front().time_ns;
}

std::int64_t HeldSeries::longest_span_ns() const {
  std::int64_t longest = 0;
  for (std::size_t i = 0; i < spans_.size(); ++i) {
    longest = std::max(longest, span_end_ns(i) - spans_[i].start_ns);
  }
  return longest;
}

}  // namespace zeus::monitor
