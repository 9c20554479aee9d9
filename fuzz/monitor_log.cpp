// A ZeusMonitor log CSV (start_time,window_name,elapsed_time,gpu<i>_energy,...) ->
// ReplayMonitor (zeus/monitor/replay_monitor.hpp), then every window replayed as a consumer (the
// power-limit optimizer's tests) would: each returns its row's time and energies under the
// header's GPU indices (each GPU named by one column only; every number finite and not
// negative), and one more window finds the log exhausted (kNotFound). Bad files may only be a
// zeus::Error naming the file.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "fuzz_files.hpp"
#include "zeus/common/error.hpp"
#include "zeus/monitor/replay_monitor.hpp"

namespace {

bool same(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zeus::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path path = zeus::fuzz::scratch_dir() / "monitor.csv";
  zeus::fuzz::write_file(path, std::string_view(reinterpret_cast<const char*>(data), size));

  std::optional<zeus::monitor::ReplayMonitor> replay;
  try {
    replay.emplace(path);
  } catch (const zeus::Error& error) {
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
    ZEUS_FUZZ_CHECK(std::string_view(error.what()).find(path.string()) != std::string_view::npos);
    return 0;
  }
  const auto& indices = replay->gpu_indices();
  for (std::size_t i = 0; i < indices.size(); ++i) {
    ZEUS_FUZZ_CHECK(indices[i] >= 0);
    for (std::size_t j = 0; j < i; ++j) {
      ZEUS_FUZZ_CHECK(indices[j] != indices[i]);  // a GPU named by two columns is refused
    }
  }
  const std::size_t rows = replay->rows().size();
  ZEUS_FUZZ_CHECK(replay->rows_left() == rows);
  for (std::size_t i = 0; i < rows; ++i) {
    const zeus::monitor::ReplayRow row = replay->rows()[i];
    ZEUS_FUZZ_CHECK(row.gpu_energy_j.size() == indices.size());
    // Times and energies are finite and not negative (as `zeus report` reads the same log).
    ZEUS_FUZZ_CHECK(std::isfinite(row.start_time_s) && row.start_time_s >= 0.0);
    ZEUS_FUZZ_CHECK(std::isfinite(row.elapsed_time_s) && row.elapsed_time_s >= 0.0);
    for (const double energy_j : row.gpu_energy_j) {
      ZEUS_FUZZ_CHECK(std::isfinite(energy_j) && energy_j >= 0.0);
    }
    replay->begin_window(row.window_name);
    const zeus::monitor::Measurement measurement = replay->end_window(row.window_name);
    ZEUS_FUZZ_CHECK(same(measurement.time_s, row.elapsed_time_s));
    for (const int index : indices) {
      ZEUS_FUZZ_CHECK(measurement.gpu_energy_j.contains(index));
    }
    ZEUS_FUZZ_CHECK(measurement.gpu_energy_j.size() == indices.size());
    for (std::size_t column = 0; column < indices.size(); ++column) {
      ZEUS_FUZZ_CHECK(same(measurement.gpu_energy_j.at(indices[column]), row.gpu_energy_j[column]));
    }
  }
  ZEUS_FUZZ_CHECK(replay->rows_left() == 0);
  replay->begin_window("one more");
  try {
    (void)replay->end_window("one more");
    ZEUS_FUZZ_CHECK(false);  // the log has no row left
  } catch (const zeus::Error& error) {
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kNotFound);
  }
  return 0;
}
