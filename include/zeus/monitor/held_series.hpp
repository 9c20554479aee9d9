// The storage of one sampled series (a GPU's power in one domain, or its temperature): readings
// read as a sample-and-hold signal, its exact integral, and a bound on the rows kept. When the
// bound is reached the oldest readings are compacted rather than forgotten: adjacent readings
// merge into spans that keep the exact integral at their edges and the lowest and highest reading
// inside, so the integral over any interval of a run of any length is answered, exactly where the
// readings are kept and within a stated bound inside a compacted span. Not thread-safe (the
// PowerSampler guards it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace zeus::monitor {

// What a series does when it holds its maximum number of rows.
enum class OverflowPolicy {
  // Merge the oldest readings into compacted spans (half the rows at most): nothing is lost from
  // the integral, and old spans lose their detail. A bound of one row cannot compact and drops.
  kCompact,
  kDropOldest,  // forget the oldest reading (counted); the running integral is unaffected
  kError,       // refuse the reading (the caller surfaces an error)
};

// One row of a series: a reading, or the time-weighted mean over a compacted span.
struct HeldPoint {
  std::int64_t time_ns = 0;  // the reading's time, or the span's start
  double value = 0.0;        // the reading, or the span's mean
  // 0 for a reading (held until the next row); for a compacted span, its length: the span holds
  // `value` as its mean, so that integrating the rows as a held signal is exact at every row.
  std::int64_t span_ns = 0;
};

// An integral and the most by which it can differ from the integral of the readings themselves
// (0 wherever the interval's ends fall on kept readings).
struct HeldIntegral {
  double value = 0.0;
  double bound = 0.0;
};

class HeldSeries {
 public:
  // At most `max_rows` rows (at least 1). With kCompact, up to half of them are compacted spans
  // and the newest readings (at least the other half) stay exact.
  explicit HeldSeries(std::size_t max_rows, OverflowPolicy policy = OverflowPolicy::kCompact);

  // Whether push() would refuse a reading (kError and the rows are at the bound).
  bool full() const;
  // Appends a reading at `time_ns`; one older than the last is ignored (false), as is any reading
  // refused by kError. Returns whether it was kept.
  bool push(std::int64_t time_ns, double value);

  bool empty() const { return readings_.empty(); }
  std::size_t rows() const { return readings_.size() + spans_.size(); }
  std::uint64_t dropped() const { return dropped_; }
  // The latest reading, and its time.
  std::optional<HeldPoint> last() const;

  // The integral of the held signal from the first reading to `time_ns` (the last reading held
  // forwards, the first held backwards); nullopt when empty. A monotonic counter for a
  // non-negative signal: the difference of two values is the integral between them.
  std::optional<HeldIntegral> integral_to(std::int64_t time_ns) const;
  // The integral over [start_ns, end_ns]; nullopt when empty, end < start, or the interval
  // reaches back before readings that kDropOldest forgot. Exact where both ends fall among the
  // exact readings; inside a compacted span of length D whose readings ranged over [lo, hi], an
  // end at x from the span's start adds at most (hi - lo) * x * (D - x) / D <= (hi - lo) * D / 4.
  std::optional<HeldIntegral> integral(std::int64_t start_ns, std::int64_t end_ns) const;
  // The row in force at `time_ns` (a reading held, or a span's mean); nullopt before the first.
  std::optional<HeldPoint> at(std::int64_t time_ns) const;
  // The rows with start_ns <= time <= end_ns (either bound open), oldest first.
  std::vector<HeldPoint> points(std::optional<std::int64_t> start_ns,
                                std::optional<std::int64_t> end_ns) const;
  // From when on every reading is kept exactly: nullopt while nothing was compacted or dropped.
  std::optional<std::int64_t> exact_since_ns() const;
  // The longest compacted span (0 when none): the coarsest resolution of the old rows.
  std::int64_t longest_span_ns() const;

 private:
  // An exact reading, with the integral from the series' first reading up to it.
  struct Reading {
    std::int64_t time_ns;
    double value;
    double integral;
  };
  // Readings merged: from `start_ns` to the next span's start (or the first kept reading), with
  // the integral up to its start and the extremes of the readings inside.
  struct Span {
    std::int64_t start_ns;
    double integral;
    double low;
    double high;
  };

  // Moves the oldest reading into the spans (a new span, or the last one extended).
  void compact_oldest();
  // Merges adjacent spans pairwise and sets the length of new spans to their mean length.
  void merge_spans();
  // The end of span `index` (the next span's start, or the first kept reading) and its integral.
  std::int64_t span_end_ns(std::size_t index) const;
  double span_end_integral(std::size_t index) const;
  // The span holding `time_ns` (caller checks it lies among the spans), and its row.
  std::size_t span_index(std::int64_t time_ns) const;
  HeldPoint span_point(std::size_t index) const;
  // The integral to `time_ns` at or after the first row (caller checks).
  HeldIntegral integral_inside(std::int64_t time_ns) const;

  std::size_t max_rows_;
  std::size_t max_spans_;  // 0 without compaction
  OverflowPolicy policy_;
  std::deque<Reading> readings_;
  std::deque<Span> spans_;
  std::int64_t span_target_ns_ = 0;  // how long a new span grows before the next one starts
  double first_value_ = 0.0;         // the first reading ever (held backwards)
  std::uint64_t dropped_ = 0;
};

}  // namespace zeus::monitor
