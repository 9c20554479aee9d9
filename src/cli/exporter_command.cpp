// `zeus exporter`: GPU, CPU and DRAM metrics for Prometheus to scrape (docs/prometheus.md).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "cli/arguments.hpp"
#include "cli/carbon_spec.hpp"
#include "cli/commands.hpp"
#include "cli/devices.hpp"
#include "cli/price_spec.hpp"
#include "common/signals.hpp"
#include "metrics/slurm_metrics.hpp"
#include "zeus/common/env.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/device/jetson.hpp"
#include "zeus/device/zeusd_config.hpp"
#include "zeus/metrics/prometheus.hpp"

namespace zeus::cli {
namespace {

struct ExporterArgs {
  std::string host = "127.0.0.1";
  int port = 9464;
  std::string gpus;
  std::string cpus;
  std::string interval = "1s";
  std::string duration;
  std::string port_file;
  std::string carbon_intensity;  // --carbon-intensity SPEC (carbon_spec.hpp); empty: none
  std::string price;             // --price SPEC (price_spec.hpp); empty: none
  std::string slurm_state_dir;   // --slurm-state-dir DIR; empty: no Slurm series
  std::string zeusd_socket;      // --zeusd-socket PATH (with --slurm-state-dir)
};

// The zeusd the Slurm series read the counters through: --zeusd-socket, else ZEUSD_SOCK_PATH /
// ZEUSD_HOST_PORT, else the plugin's default socket; ZEUSD_TOKEN in every case.
device::ZeusdConfig slurm_zeusd_config(const ExporterArgs& args) {
  const EnvLookup env = process_env();
  device::ZeusdConfig config;
  if (auto from_env = device::zeusd_config_from_env(env)) {
    config = std::move(*from_env);
  } else {
    config.socket_path = "/run/zeusd/zeusd.sock";
    if (auto token = env("ZEUSD_TOKEN"); token && !token->empty()) {
      config.token = std::move(token);
    }
  }
  if (!args.zeusd_socket.empty()) {
    config.socket_path = args.zeusd_socket;
  }
  return config;
}

int run(const ExporterArgs& args) {
  if (args.port < 0 || args.port > 65535) {
    throw Error(
        ErrorKind::kInvalidArgument,
        fmt::format("--port {} is out of range; use 1-65535 (0: any free port)", args.port));
  }
  metrics::DeviceMetricsOptions options;
  options.interval_s = parse_duration_s(args.interval, "--interval");
  if (options.interval_s < 0.001) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--interval \"{}\" is below 1 ms", args.interval));
  }
  std::optional<double> duration_s;
  if (!args.duration.empty()) {
    duration_s = parse_duration_s(args.duration, "--duration");
  }
  // Bad SPECs are usage errors before anything is served. The providers are then asked only by
  // the reading thread (never by a scrape), and a failing one leaves its intervals out.
  if (!args.carbon_intensity.empty()) {
    options.carbon_intensity = carbon_provider_from_spec(args.carbon_intensity);
  }
  if (!args.price.empty()) {
    options.electricity_price = price_provider_from_spec(args.price);
  }

  const device::Gpus& gpus = device::get_gpus();
  options.soc = device::get_soc().soc;  // a Jetson's rails (ZEUS_JETSON_ROOT for another root)
  if (const auto gpu_request = parse_device_request(args.gpus, "--gpus")) {
    options.gpu_indices = select_gpus(gpu_request, gpus);
  }
  std::vector<std::shared_ptr<device::Cpu>> cpus;
  const device::CpuDiscovery& cpu_discovery = device::get_cpus();
  if (args.cpus != "none") {
    if (args.cpus.empty()) {
      cpus = cpu_discovery.cpus;
    } else {
      const auto wanted = parse_device_request(args.cpus, "--cpus");
      require_cpus(cpu_discovery, args.cpus);
      cpus = cpus_with_indices(cpu_discovery, select_cpus(wanted, cpu_discovery));
    }
  }
  if (gpus.empty() && cpus.empty()) {
    std::cerr << "zeus exporter: note: no GPU and no readable CPU package; only the exporter's "
                 "own metrics will be served\n";
  }

  // SIGTERM and SIGINT go to this thread only (the server's threads inherit the mask).
  block_stop_signals();

  metrics::DeviceMetrics devices(gpus, cpus, options);
  std::unique_ptr<metrics::SlurmMetrics> slurm;
  std::string slurm_from;
  std::vector<metrics::MetricsServer::Source> sources = {
      [&devices](std::string& out) { devices.render(out); }};
  if (!args.slurm_state_dir.empty()) {
    metrics::SlurmMetricsOptions slurm_options;
    slurm_options.state_dir = args.slurm_state_dir;
    slurm_options.zeusd = slurm_zeusd_config(args);
    slurm_from = fmt::format("; Slurm steps from {} through zeusd at {}", args.slurm_state_dir,
                             slurm_options.zeusd.describe());
    // Not faster than once a second: each collection is two requests to zeusd.
    slurm_options.interval_s = std::max(options.interval_s, 1.0);
    slurm = std::make_unique<metrics::SlurmMetrics>(std::move(slurm_options));
    sources.emplace_back([&slurm](std::string& out) { slurm->render(out); });
  }
  metrics::MetricsServer server(args.host, args.port, std::move(sources));
  server.start();
  if (!args.port_file.empty()) {
    write_port_file(args.port_file, server.port());
  }
  std::string priced;
  if (options.carbon_intensity) {
    priced = "; with carbon emissions";
  }
  if (options.electricity_price) {
    priced += priced.empty() ? "; with electricity cost" : " and cost";
  }
  priced += slurm_from;
  std::cerr << fmt::format(
      "zeus exporter: serving http://{}:{}/metrics ({} GPU(s), {} CPU package(s), read every "
      "{}{})\n",
      args.host, server.port(), options.gpu_indices ? options.gpu_indices->size() : gpus.size(),
      cpus.size(), format_duration(options.interval_s), priced);

  wait_for_stop_signal(duration_s);
  server.stop();
  if (slurm) {
    slurm->stop();
  }
  devices.stop();
  std::cerr << "zeus exporter: stopped\n";
  return kExitOk;
}

}  // namespace

void add_exporter(CLI::App& app, Action& action) {
  CLI::App* command = app.add_subcommand(
      "exporter", "Serve GPU, CPU and DRAM energy and power at /metrics for Prometheus to scrape");
  auto args = std::make_shared<ExporterArgs>();
  command
      ->add_option("--host", args->host,
                   "Address to listen on (0.0.0.0: every interface, for a remote Prometheus)")
      ->capture_default_str();
  command->add_option("--port", args->port, "Port to listen on (0: any free port)")
      ->capture_default_str();
  command->add_option("--gpus", args->gpus, "GPUs to export, e.g. 0,1; default all");
  command->add_option("--cpus", args->cpus,
                      "CPU packages to export through RAPL, e.g. 0,1, or none; default all that "
                      "can be read");
  command->add_option("--interval", args->interval, "How often the devices are read, e.g. 500ms")
      ->capture_default_str();
  command->add_option("--duration", args->duration,
                      "Stop after this long (default: until SIGTERM)");
  command->add_option("--port-file", args->port_file,
                      "Write the port listened on to this file once serving");
  command->add_option("--carbon-intensity", args->carbon_intensity,
                      "Add carbon emission counters (gCO2eq per device), from gCO2eq/kWh given "
                      "as a number, a CSV/JSON time series file (timestamp,gco2eq_per_kwh) or "
                      "electricitymaps:ZONE (token from ELECTRICITYMAPS_TOKEN); docs/carbon.md");
  command->add_option(
      "--price", args->price,
      "Add electricity cost counters per device, from a price SPEC as zeus monitor "
      "--price takes (a price per kWh, a JSON tariff file or openei:LABEL@LAT,LON); "
      "docs/cost.md");
  CLI::Option* slurm = command->add_option(
      "--slurm-state-dir", args->slurm_state_dir,
      "Add the running Slurm steps' GPU energy and caps, labelled by job and step, from the "
      "zeus SPANK plugin's state files in DIR (its state_dir=, /run/zeus-slurm by default), "
      "the counters read through zeusd; docs/prometheus.md");
  command
      ->add_option("--zeusd-socket", args->zeusd_socket,
                   "With --slurm-state-dir: zeusd's Unix socket (default ZEUSD_SOCK_PATH or "
                   "ZEUSD_HOST_PORT, else /run/zeusd/zeusd.sock)")
      ->needs(slurm);
  command->footer(
      "Metrics (text format 0.0.4): zeus_gpu_energy_joules_total, power_monitor_gpu_power_watts, "
      "zeus_gpu_power_limit_watts, zeus_gpu_temperature_celsius, zeus_cpu_energy_joules_total, "
      "zeus_dram_energy_joules_total, with --carbon-intensity "
      "zeus_gpu_carbon_emission_grams_total, "
      "with --price zeus_gpu_energy_cost_total, with --slurm-state-dir "
      "zeus_slurm_step_gpu_energy_joules, ... (docs/prometheus.md). Stops on SIGINT or "
      "SIGTERM.");
  command->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace zeus::cli
