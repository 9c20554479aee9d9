// Helpers shared by the two sources of a WorkloadTrace (trace files and built-in models).
#pragma once

#include <string>
#include <vector>

#include "zeus/sim/trace.hpp"

namespace zeus::sim::detail {

// "librispeech/deepspeech2/adamw".
std::string workload_label(const Workload& workload);

// Whether two target metrics are the same up to the rounding of a CSV file (relative 1e-6).
bool same_metric(double a, double b);

// "8, 16, 32".
std::string join_ints(const std::vector<int>& values);

// Fills power_limits_w (the ascending union over batch sizes) from trace.batch_sizes.
void collect_power_limits(WorkloadTrace& trace);

// The reference's capping rule: when b0 is not among trace.batch_sizes, b0 becomes the largest
// batch size below it and a note says so. Throws kInvalidArgument when no batch size is at or
// below b0. `origin` names the source in the note ("the v100 trace", "the built-in model").
void cap_default_batch_size(WorkloadTrace& trace, const std::string& origin);

// Throws kInvalidArgument when no run of any batch size reaches the target within max_epochs,
// naming the target and ending with `hint` (what to do).
void check_target_reached(const WorkloadTrace& trace, const std::string& hint);

// Throws kInvalidArgument when no run of b0 reaches the target within max_epochs (max_epochs <= 0:
// no bound), since every simulated policy starts from b0.
void check_default_converges(const WorkloadTrace& trace);

}  // namespace zeus::sim::detail
