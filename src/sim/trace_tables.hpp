// The two trace files as parsed tables, before they are joined into a WorkloadTrace (trace.cpp):
// every row checked where it is read (numbers within src/sim/limits.hpp, no duplicate rows), and
// the rule that tells a corrupted workload name from another workload.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "zeus/sim/trace.hpp"

namespace zeus::sim::detail {

// Workloads are keyed by dataset, network and optimizer joined with a separator that cannot
// appear in a CSV field of ours.
std::string workload_key(std::string_view dataset, std::string_view network,
                         std::string_view optimizer);
// The key as "dataset/network/optimizer".
std::string key_label(const std::string& key);

struct TrainRow {
  int batch_size = 0;
  int run = 0;
  double target_metric = 0.0;
  std::optional<int> target_epoch;
  int line = 0;
};

struct TrainTable {
  std::string path;
  std::unordered_map<std::string, std::vector<TrainRow>> rows;  // by workload key, in file order
};

struct PowerRow {
  int batch_size = 0;
  PowerPoint point;
  int line = 0;
};

struct PowerTable {
  std::string path;
  std::unordered_map<std::string, std::vector<PowerRow>> rows;  // by workload key, in file order
  int max_power_limit_w = 0;
};

// Read summary_train.csv / summary_power_<gpu>.csv. Throws Error(kInvalidArgument)
// "<file>:<line>: ..." for a malformed or out-of-range field and for a row that repeats an earlier
// one ("duplicate of line N"); what text::read_file throws for a file that cannot be read.
std::shared_ptr<const TrainTable> parse_train(const std::filesystem::path& path);
std::shared_ptr<const PowerTable> parse_power(const std::filesystem::path& path);

// Notes on rows that look like `workload` with one corrupted name, and are therefore left out of
// it: a group of rows whose key differs from the workload's in exactly one name, where that name
// is used by no other group of its file and by no group of the other file. A real workload's
// names appear in both files (it is joined across them), so only a name found nowhere else is
// taken for a typo. One note per such group, naming the file and its first line.
std::vector<std::string> corrupted_name_notes(const TrainTable& train, const PowerTable& power,
                                              const Workload& workload);

}  // namespace zeus::sim::detail
