// The list-valued options of `zeus sim` (--gpu/--workload/--policy, --seeds, --target-metric,
// --drift), parsed apart from the command (sim_command.cpp) so that each error names its option
// and what a valid value looks like.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::cli::sim_args {

// "a,b, c" -> {"a", "b", "c"}; an empty item is an error naming `flag`.
std::vector<std::string> split_list(std::string_view text, std::string_view flag);

// `text` is "all" or a comma-separated list of names from `valid`; returns them in the order of
// `valid`, without repeats.
std::vector<std::string> select_names(std::string_view text, const std::vector<std::string>& valid,
                                      std::string_view flag, std::string_view what);

// "1-50", "7", "1,2,5-9" -> the seeds, in the order given. Repeats and reversed ranges are errors.
std::vector<std::uint64_t> parse_seeds(std::string_view text);

// --target-metric: "X" for the one selected workload, or "dataset=X,dataset=Y" naming selected
// workloads; the others keep the paper's target. Returns a target per selected workload.
std::vector<std::optional<double>> parse_target_metrics(std::string_view text,
                                                        const std::vector<std::string>& workloads);

// --drift AT:HOW. HOW is best*F or best/F (the built-in models' best batch size times or divided
// by F) or target=X (the target metric becomes X).
struct DriftSpec {
  int at_recurrence = 0;
  std::optional<double> best_batch_size_factor;
  std::optional<double> target_metric;
};
DriftSpec parse_drift(const std::string& text);

}  // namespace zeus::cli::sim_args
