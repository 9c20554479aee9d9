#include "trace_tables.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "bounded_fields.hpp"
#include "common/csv.hpp"
#include "common/text.hpp"
#include "limits.hpp"
#include "zeus/common/error.hpp"

namespace zeus::sim::detail {

namespace {

using CsvReader = csv::Reader;

constexpr char kKeySeparator = '\x1f';

constexpr NumberColumn kBatchSize{"batch_size", "a positive whole number", "", 1,
                                  static_cast<double>(limits::kMaxBatchSize)};
constexpr NumberColumn kRun{"run", "a whole number", "", -2147483648.0, 2147483647.0};
constexpr NumberColumn kTargetMetric{"target_metric", "a number", "", kAnyFinite,
                                     std::numeric_limits<double>::max()};
constexpr NumberColumn kTargetEpoch{"target_epoch", "a 1-based whole number of epochs or nan",
                                    "epochs", 1, static_cast<double>(limits::kMaxTargetEpoch)};
constexpr NumberColumn kLearningRate{"learning_rate",          "a positive number", "", 0.0,
                                     limits::kMaxLearningRate, /*above_min=*/true};
constexpr NumberColumn kPowerLimit{"power_limit", "a positive whole number of watts", "W", 1,
                                   static_cast<double>(limits::kMaxPowerLimitW)};
constexpr NumberColumn kTimePerEpoch{"time_per_epoch", "a positive number of seconds", "s",
                                     limits::kMinTimePerEpochS, limits::kMaxTimePerEpochS};
constexpr NumberColumn kAveragePower{"average_power", "a positive number of watts", "W",
                                     limits::kMinAveragePowerW, limits::kMaxAveragePowerW};

// Appends to the vector of `key`, remembering the last one (rows come grouped by workload).
template <typename Row>
class GroupedRows {
 public:
  explicit GroupedRows(std::unordered_map<std::string, std::vector<Row>>& rows) : rows_(rows) {}
  std::vector<Row>& at(const std::string& key) {
    if (current_ == nullptr || key != current_key_) {
      current_ = &rows_[key];
      current_key_ = key;
    }
    return *current_;
  }

 private:
  std::unordered_map<std::string, std::vector<Row>>& rows_;
  std::string current_key_;
  std::vector<Row>* current_ = nullptr;
};

std::string row_key(const CsvReader& csv, int line, const std::vector<std::string_view>& fields) {
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
    if (fields[i].empty()) {
      csv.fail(line, "dataset, network and optimizer must not be empty");
    }
    // A control character is corruption (and the workload key's separator is one).
    const auto control = std::find_if(fields[i].begin(), fields[i].end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == '\x7f';
    });
    if (control != fields[i].end()) {
      csv.fail(line, fmt::format("column '{}' contains the control character 0x{:02x}; names are "
                                 "printable text (is the file corrupted?)",
                                 i == 0   ? "dataset"
                                 : i == 1 ? "network"
                                          : "optimizer",
                                 static_cast<unsigned char>(*control)));
    }
  }
  return workload_key(fields[0], fields[1], fields[3]);
}

// "<file>:<line>: duplicate of line <first>: <what> appears twice; remove one of them".
template <typename Key>
void check_unique(std::map<Key, int>& seen, Key key, const CsvReader& csv, int line,
                  const std::string& what) {
  const auto [it, inserted] = seen.emplace(std::move(key), line);
  if (!inserted) {
    csv.fail(line, "duplicate of line " + std::to_string(it->second) + ": " + what +
                       " appears twice; remove one of them");
  }
}

}  // namespace

std::string workload_key(std::string_view dataset, std::string_view network,
                         std::string_view optimizer) {
  std::string key;
  key.reserve(dataset.size() + network.size() + optimizer.size() + 2);
  key.append(dataset).append(1, kKeySeparator).append(network).append(1, kKeySeparator);
  key.append(optimizer);
  return key;
}

std::string key_label(const std::string& key) {
  std::string label = key;
  std::replace(label.begin(), label.end(), kKeySeparator, '/');
  return label;
}

std::shared_ptr<const TrainTable> parse_train(const std::filesystem::path& path) {
  const CsvReader csv(path,
                      {"dataset", "network", "batch_size", "optimizer", "learning_rate", "run",
                       "target_metric", "target_epoch"},
                      "trace file");
  auto table = std::make_shared<TrainTable>();
  table->path = csv.path();
  GroupedRows<TrainRow> groups(table->rows);
  // A row is identified by its workload, batch size, run and target metric: the learning rate
  // is one per batch size in these traces, and the simulation does not distinguish by it.
  std::map<std::tuple<std::string, int, int, double>, int> seen;
  csv.for_each_row([&](int line, const std::vector<std::string_view>& f) {
    const std::string key = row_key(csv, line, f);
    TrainRow row;
    row.line = line;
    row.batch_size = bounded_whole(csv, line, kBatchSize, f[2]);
    bounded_number(csv, line, kLearningRate, f[4]);
    row.run = bounded_whole(csv, line, kRun, f[5]);
    row.target_metric = bounded_number(csv, line, kTargetMetric, f[6]);
    const std::string_view epoch_text = f[7];
    const auto epoch_real = csv::to_double(epoch_text);
    if (epoch_text.empty() || (epoch_real && std::isnan(*epoch_real))) {
      row.target_epoch = std::nullopt;
    } else {
      row.target_epoch = bounded_whole(csv, line, kTargetEpoch, epoch_text);
    }
    check_unique(seen, std::make_tuple(key, row.batch_size, row.run, row.target_metric), csv, line,
                 "run " + std::to_string(row.run) + " of " + key_label(key) + " at batch size " +
                     std::to_string(row.batch_size) + " and target_metric " + std::string(f[6]));
    groups.at(key).push_back(row);
  });
  return table;
}

std::shared_ptr<const PowerTable> parse_power(const std::filesystem::path& path) {
  const CsvReader csv(path,
                      {"dataset", "network", "batch_size", "optimizer", "power_limit",
                       "time_per_epoch", "average_power"},
                      "trace file");
  auto table = std::make_shared<PowerTable>();
  table->path = csv.path();
  GroupedRows<PowerRow> groups(table->rows);
  std::map<std::tuple<std::string, int, int>, int> seen;  // workload, batch size, power limit
  csv.for_each_row([&](int line, const std::vector<std::string_view>& f) {
    const std::string key = row_key(csv, line, f);
    PowerRow row;
    row.line = line;
    row.batch_size = bounded_whole(csv, line, kBatchSize, f[2]);
    row.point.power_limit_w = bounded_whole(csv, line, kPowerLimit, f[4]);
    row.point.time_per_epoch_s = bounded_number(csv, line, kTimePerEpoch, f[5]);
    row.point.average_power_w = bounded_number(csv, line, kAveragePower, f[6]);
    check_unique(seen, std::make_tuple(key, row.batch_size, row.point.power_limit_w), csv, line,
                 key_label(key) + " at batch size " + std::to_string(row.batch_size) +
                     " and power limit " + std::to_string(row.point.power_limit_w) + " W");
    table->max_power_limit_w = std::max(table->max_power_limit_w, row.point.power_limit_w);
    groups.at(key).push_back(row);
  });
  if (table->rows.empty()) {
    throw Error(ErrorKind::kInvalidArgument, table->path + ":1: the file has a header but no rows");
  }
  return table;
}

// ---- Corrupted names ----

namespace {

constexpr std::array<std::string_view, 3> kNameColumns = {"dataset", "network", "optimizer"};

// For each name column, how many groups (workloads) of a table use each name.
using NameCensus = std::array<std::map<std::string, int, std::less<>>, 3>;

template <typename Rows>
NameCensus census(const Rows& rows) {
  NameCensus names;
  for (const auto& [key, group] : rows) {
    const std::vector<std::string_view> parts = text::split(key, kKeySeparator);
    for (std::size_t i = 0; i < names.size(); ++i) {
      ++names[i][std::string(parts[i])];
    }
  }
  return names;
}

int uses(const NameCensus& names, std::size_t column, std::string_view name) {
  const auto it = names[column].find(name);
  return it == names[column].end() ? 0 : it->second;
}

struct TableView {
  const std::string& path;
  NameCensus names;
};

template <typename Rows>
void note_table(const Rows& rows, const TableView& own, const TableView& other,
                const Workload& workload, std::vector<std::pair<int, std::string>>& notes) {
  const std::array<std::string_view, 3> expected = {workload.dataset, workload.network,
                                                    workload.optimizer};
  const std::string label = key_label(workload_key(expected[0], expected[1], expected[2]));
  for (const auto& [key, group] : rows) {
    const std::vector<std::string_view> parts = text::split(key, kKeySeparator);
    std::vector<std::size_t> differing;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (parts[i] != expected[i]) {
        differing.push_back(i);
      }
    }
    if (differing.size() != 1) {
      continue;
    }
    const std::size_t column = differing[0];
    if (uses(own.names, column, parts[column]) != 1 ||
        uses(other.names, column, parts[column]) != 0) {
      continue;  // a name another workload uses too: a workload of its own
    }
    const int first_line = group.front().line;
    std::string note =
        own.path + ":" + std::to_string(first_line) + ": " + std::to_string(group.size()) +
        (group.size() == 1 ? " row" : " rows") + " of " + key_label(key) + " left out of " + label +
        ": " + std::string(kNameColumns[column]) + " '" + std::string(parts[column]) +
        "' appears nowhere else in " + own.path + " or " + other.path + "; if it is a corrupted '" +
        std::string(expected[column]) + "', fix the name (or remove the rows)";
    notes.emplace_back(first_line, std::move(note));
  }
}

}  // namespace

std::vector<std::string> corrupted_name_notes(const TrainTable& train, const PowerTable& power,
                                              const Workload& workload) {
  const TableView train_view{train.path, census(train.rows)};
  const TableView power_view{power.path, census(power.rows)};
  std::vector<std::string> notes;
  for (int table = 0; table < 2; ++table) {
    std::vector<std::pair<int, std::string>> found;  // by first line, for a stable order
    if (table == 0) {
      note_table(train.rows, train_view, power_view, workload, found);
    } else {
      note_table(power.rows, power_view, train_view, workload, found);
    }
    std::sort(found.begin(), found.end());
    for (auto& [line, note] : found) {
      notes.push_back(std::move(note));
    }
  }
  return notes;
}

}  // namespace zeus::sim::detail
