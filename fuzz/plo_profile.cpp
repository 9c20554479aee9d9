// A power-limit profile JSON ({"measurements": [{"power_limit", "energy", "time"}, ...]}) ->
// load_power_limit_profile (zeus/runtime/power_limit_optimizer.hpp), and on success every
// optimum selector (zeus/optimizer/power_limit_selector.hpp) over what it read. After a NUL, the
// rest is a --selector value of `zeus plo show` and `zeus report` -> cli::parse_selector
// (src/cli/plo_command.cpp, compiled in), run over the profile (or a fixed one when it did not
// load).
//
// Bad files may only be a zeus::Error naming the file. A profile that loads holds exactly the
// document's measurements (each power limit as written, none twice, energy and time positive and
// finite), survives save_power_limit_profile and a reload unchanged, and every selector picks one
// of its power limits, the one its rule says. A --selector value either names a selector that
// does the same or is a zeus::Error; one cut off after ':' is always an error.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"
#include "fuzz_check.hpp"
#include "fuzz_files.hpp"
#include "zeus/common/error.hpp"
#include "zeus/optimizer/cost.hpp"
#include "zeus/optimizer/power_limit_selector.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"

namespace {

namespace optimizer = zeus::optimizer;
using Measurements = std::vector<optimizer::PowerLimitMeasurement>;

bool is_one_of(const Measurements& measurements, int power_limit_w) {
  for (const auto& m : measurements) {
    if (m.power_limit_w == power_limit_w) {
      return true;
    }
  }
  return false;
}

const optimizer::PowerLimitMeasurement& at_limit(const Measurements& measurements, int limit_w) {
  for (const auto& m : measurements) {
    if (m.power_limit_w == limit_w) {
      return m;
    }
  }
  ZEUS_FUZZ_CHECK(false);
  return measurements.front();
}

// The document as JSON says it (parsed here on its own): the loader may not reinterpret a
// power limit (an integer that does not fit an int, say) or drop a measurement.
void check_against_document(std::string_view text, const Measurements& measurements) {
  const nlohmann::json document = nlohmann::json::parse(text.begin(), text.end());
  const nlohmann::json& entries = document.at("measurements");
  ZEUS_FUZZ_CHECK(entries.is_array() && entries.size() == measurements.size());
  for (std::size_t i = 0; i < measurements.size(); ++i) {
    const nlohmann::json& limit = entries[i].at("power_limit");
    ZEUS_FUZZ_CHECK(limit.is_number_integer());
    if (limit.is_number_unsigned()) {
      ZEUS_FUZZ_CHECK(limit.get<std::uint64_t>() ==
                      static_cast<std::uint64_t>(measurements[i].power_limit_w));
    } else {
      ZEUS_FUZZ_CHECK(limit.get<std::int64_t>() == measurements[i].power_limit_w);
    }
  }
}

// The earliest measurement with the lowest key: what every selector but MaxSlowdown promises.
template <typename Key>
int model_argmin(const Measurements& measurements, Key key) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < measurements.size(); ++i) {
    if (key(measurements[i]) < key(measurements[best])) {
      best = i;
    }
  }
  return measurements[best].power_limit_w;
}

void check_selectors(const Measurements& measurements) {
  const int energy_w = optimizer::EnergySelector().select(measurements);
  ZEUS_FUZZ_CHECK(energy_w == model_argmin(measurements, [](const auto& m) { return m.energy_j; }));
  const int time_w = optimizer::TimeSelector().select(measurements);
  ZEUS_FUZZ_CHECK(time_w == model_argmin(measurements, [](const auto& m) { return m.time_s; }));

  int max_limit_w = 0;
  for (const auto& m : measurements) {
    max_limit_w = std::max(max_limit_w, m.power_limit_w);
  }
  for (const double eta : {0.0, 0.5, 1.0}) {
    for (const int world_size : {1, 8}) {
      const int chosen_w = optimizer::ZeusCostSelector(eta, world_size).select(measurements);
      ZEUS_FUZZ_CHECK(is_one_of(measurements, chosen_w));
      const double max_power_w = static_cast<double>(max_limit_w) * world_size;
      ZEUS_FUZZ_CHECK(chosen_w == model_argmin(measurements, [&](const auto& m) {
                        return optimizer::zeus_cost(m.energy_j, m.time_s, eta, max_power_w);
                      }));
    }
  }
  const int fixed_w = optimizer::ZeusCostSelector::with_max_power(0.5, 700.0).select(measurements);
  ZEUS_FUZZ_CHECK(is_one_of(measurements, fixed_w));

  const double reference_s = at_limit(measurements, max_limit_w).time_s;
  for (const double factor : {1.0, 1.1, 2.0}) {
    const int chosen_w = optimizer::MaxSlowdownSelector(factor).select(measurements);
    ZEUS_FUZZ_CHECK(is_one_of(measurements, chosen_w));
    ZEUS_FUZZ_CHECK(at_limit(measurements, chosen_w).time_s <= factor * reference_s);
    for (const auto& m : measurements) {
      ZEUS_FUZZ_CHECK(m.power_limit_w >= chosen_w || m.time_s > factor * reference_s);
    }
  }
}

// `zeus plo show --selector TEXT [--world-size N]`, as the CLI parses it.
void check_selector_text(const std::string& text, const Measurements& measurements) {
  for (const int world_size : {1, 4}) {
    std::shared_ptr<const optimizer::OptimumSelector> selector;
    try {
      selector = zeus::cli::parse_selector(text, world_size);
    } catch (const zeus::Error& error) {
      ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
      continue;
    }
    ZEUS_FUZZ_CHECK(selector != nullptr);
    ZEUS_FUZZ_CHECK(text.empty() || text.back() != ':');
    ZEUS_FUZZ_CHECK(!selector->describe().empty());
    ZEUS_FUZZ_CHECK(is_one_of(measurements, selector->select(measurements)));
  }
}

const Measurements kFixedProfile = {{300, 5200.0, 20.0}, {250, 4800.0, 21.5}, {200, 4750.0, 25.0}};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zeus::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path path = zeus::fuzz::scratch_dir() / "profile.json";
  static const std::filesystem::path saved = zeus::fuzz::scratch_dir() / "saved.json";
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view text = input.substr(0, nul);
  zeus::fuzz::write_file(path, text);

  zeus::runtime::PowerLimitProfile profile;
  try {
    profile = zeus::runtime::load_power_limit_profile(path);
  } catch (const zeus::Error& error) {
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
    ZEUS_FUZZ_CHECK(std::string_view(error.what()).find(path.string()) != std::string_view::npos);
    if (nul != std::string_view::npos) {
      check_selector_text(std::string(input.substr(nul + 1)), kFixedProfile);
    }
    return 0;
  }
  if (nul != std::string_view::npos) {
    check_selector_text(std::string(input.substr(nul + 1)), profile.measurements);
  }
  const Measurements& measurements = profile.measurements;
  ZEUS_FUZZ_CHECK(!measurements.empty());
  for (std::size_t i = 0; i < measurements.size(); ++i) {
    const auto& m = measurements[i];
    ZEUS_FUZZ_CHECK(m.power_limit_w > 0);
    ZEUS_FUZZ_CHECK(std::isfinite(m.energy_j) && m.energy_j > 0.0);
    ZEUS_FUZZ_CHECK(std::isfinite(m.time_s) && m.time_s > 0.0);
    for (std::size_t j = 0; j < i; ++j) {
      ZEUS_FUZZ_CHECK(measurements[j].power_limit_w != m.power_limit_w);
    }
  }
  check_against_document(text, measurements);
  check_selectors(measurements);

  zeus::runtime::save_power_limit_profile(saved, profile);
  const zeus::runtime::PowerLimitProfile again = zeus::runtime::load_power_limit_profile(saved);
  ZEUS_FUZZ_CHECK(again.measurements.size() == measurements.size());
  for (std::size_t i = 0; i < measurements.size(); ++i) {
    ZEUS_FUZZ_CHECK(again.measurements[i].power_limit_w == measurements[i].power_limit_w);
    ZEUS_FUZZ_CHECK(again.measurements[i].energy_j == measurements[i].energy_j);
    ZEUS_FUZZ_CHECK(again.measurements[i].time_s == measurements[i].time_s);
  }
  return 0;
}
