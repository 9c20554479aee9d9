// The exporter's SoC rails (soc_metrics.hpp).
#include "metrics/soc_metrics.hpp"

#include <fmt/format.h>

#include <iterator>

#include "metrics/exposition.hpp"

namespace zeus::metrics {

namespace {

monitor::SocSamplerOptions sampler_options(double interval_s, std::shared_ptr<Clock> clock) {
  monitor::SocSamplerOptions options;
  options.period_s = interval_s;
  options.max_samples_per_series = 2;  // a view needs the latest value, not a timeline
  options.clock = std::move(clock);
  options.start_thread = false;  // driven by DeviceMetrics' thread
  return options;
}

std::string rail_labels(const device::PowerRail& rail) {
  return fmt::format("rail=\"{}\",kind=\"{}\"", escape_label_value(rail.name),
                     device::rail_kind_name(rail.kind));
}

}  // namespace

SocMetrics::SocMetrics(std::shared_ptr<const device::JetsonSoc> soc, double interval_s,
                       std::shared_ptr<Clock> clock)
    : sampler_(std::move(soc), sampler_options(interval_s, std::move(clock))),
      rails_(sampler_.soc().rails().size()) {}

void SocMetrics::sample_once() {
  sampler_.sample_once();
  const monitor::SocReading now = sampler_.read_now();  // every rail at one instant
  std::vector<Rail> read(rails_.size());
  for (std::size_t i = 0; i < read.size(); ++i) {
    read[i] = {sampler_.power_w(i), now.energy_j[i], sampler_.skipped(i)};
  }
  const std::lock_guard lock(mutex_);
  rails_ = std::move(read);
}

void SocMetrics::render(std::string& out) const {
  const std::lock_guard lock(mutex_);
  const auto& rails = sampler_.soc().rails();
  const auto line = [&out](std::string_view name, const std::string& labels, double value) {
    fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, labels, format_value(value));
  };
  write_family_header(out, "zeus_soc_rail_power_watts", "gauge",
                      "SoC power rail draw at the latest poll, in watts");
  for (std::size_t i = 0; i < rails_.size(); ++i) {
    if (rails_[i].power_w) {
      line("zeus_soc_rail_power_watts", rail_labels(rails[i]), *rails_[i].power_w);
    }
  }
  write_family_header(out, "zeus_soc_rail_energy_joules_total", "counter",
                      "SoC power rail energy (polled power integrated) since the exporter "
                      "started, in joules");
  for (std::size_t i = 0; i < rails_.size(); ++i) {
    line("zeus_soc_rail_energy_joules_total", rail_labels(rails[i]), rails_[i].energy_j);
  }
}

void SocMetrics::render_read_errors(std::string& out) const {
  const std::lock_guard lock(mutex_);
  const auto& rails = sampler_.soc().rails();
  for (std::size_t i = 0; i < rails_.size(); ++i) {
    fmt::format_to(std::back_inserter(out), "zeus_device_read_errors_total{{device=\"{}\"}} {}\n",
                   escape_label_value("soc_rail_" + rails[i].name),
                   format_value(static_cast<double>(rails_[i].errors)));
  }
}

}  // namespace zeus::metrics
