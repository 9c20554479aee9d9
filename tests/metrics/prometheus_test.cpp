// The Prometheus exposition: escaping, histograms, device metrics on simulated GPUs and a fake
// powercap tree, the HTTP server, and ZeusMonitor windows feeding the histograms.
#include "zeus/metrics/prometheus.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>

#include <cmath>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

#include "exposition_check.hpp"
#include "metrics/exposition.hpp"
#include "monitor/test_support.hpp"
#include "support/fault_injecting_gpu.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/rapl.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace zeus::metrics {
namespace {

using zeus::testing::SimulatedRig;
using zeus::testing::TempDir;

TEST(PrometheusFormat, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(escape_label_value(R"(a"b\c)"
                               "\n"
                               "d"),
            R"(a\"b\\c\nd)");
  EXPECT_EQ(escape_help("x\\y\nz \"q\""), "x\\\\y\\nz \"q\"");
  // Invalid UTF-8 (a GPU name, a window name) would make Prometheus refuse the whole scrape.
  EXPECT_EQ(escape_label_value("gpu\xff"), "gpu\xEF\xBF\xBD");
  EXPECT_EQ(escape_help("h\xc3"), "h\xEF\xBF\xBD");
  EXPECT_EQ(format_value(3.0), "3");
  EXPECT_EQ(format_value(0.25), "0.25");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
  EXPECT_EQ(std::stod(format_value(1.0 / 3.0)), 1.0 / 3.0);  // round-trips
}

TEST(WindowHistograms, CumulativeBucketsSumAndCountPerWindowAndIndex) {
  WindowHistograms histograms;
  monitor::Measurement m;
  m.time_s = 0.7;
  m.gpu_energy_j.set(0, 100.0);  // le="100" is inclusive
  m.gpu_energy_j.set(1, 2000.0);
  m.cpu_energy_j.set(0, 7.0);
  histograms.observe("step \"1\"", m);
  m.gpu_energy_j.set(0, 30.0);
  histograms.observe("step \"1\"", m);
  std::string text;
  histograms.render(text);
  expect_valid_exposition(text);
  const std::string w = R"(window="step \"1\"")";
  EXPECT_EQ(sample(text, "energy_monitor_gpu_energy_joules_bucket{" + w + R"(,index="0",le="50"})"),
            1);
  EXPECT_EQ(
      sample(text, "energy_monitor_gpu_energy_joules_bucket{" + w + R"(,index="0",le="100"})"), 2);
  EXPECT_EQ(
      sample(text, "energy_monitor_gpu_energy_joules_bucket{" + w + R"(,index="0",le="+Inf"})"), 2);
  EXPECT_EQ(sample(text, "energy_monitor_gpu_energy_joules_sum{" + w + R"(,index="0"})"), 130);
  EXPECT_EQ(sample(text, "energy_monitor_gpu_energy_joules_count{" + w + R"(,index="0"})"), 2);
  EXPECT_EQ(
      sample(text, "energy_monitor_gpu_energy_joules_bucket{" + w + R"(,index="1",le="1000"})"), 0);
  EXPECT_EQ(
      sample(text, "energy_monitor_gpu_energy_joules_bucket{" + w + R"(,index="1",le="+Inf"})"), 2);
  EXPECT_EQ(sample(text, "energy_monitor_cpu_energy_joules_bucket{" + w + R"(,index="0",le="10"})"),
            2);
  EXPECT_EQ(sample(text, "zeus_window_duration_seconds_bucket{" + w + R"(,le="1"})"), 2);
  EXPECT_EQ(sample(text, "zeus_window_duration_seconds_count{" + w + "}"), 2);
  EXPECT_NE(text.find("# TYPE energy_monitor_dram_energy_joules histogram"), std::string::npos);
}

TEST(WindowHistograms, BadBucketsAreRefusedNamingTheList) {
  WindowHistograms::Buckets empty;
  empty.gpu_energy_j.clear();
  try {
    WindowHistograms histograms(empty);
    FAIL() << "accepted empty buckets";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("GPU energy"), std::string::npos);
  }
  WindowHistograms::Buckets unsorted;
  unsorted.duration_s = {1, 1};
  EXPECT_THROW(WindowHistograms{unsorted}, Error);
}

TEST(DeviceMetrics, CountersGaugesAndInfoFromSimulatedGpusAndRapl) {
  SimulatedRig rig(2, "a100");  // 55 W idle, 400 W limit
  TempDir dir;
  zeus::testing::make_powercap_tree(dir.path(), 1, true);
  const device::CpuDiscovery cpus = device::discover_rapl_cpus(dir.path());
  ASSERT_TRUE(cpus.available) << cpus.message;
  DeviceMetricsOptions options;
  options.clock = rig.clock;
  options.start_thread = false;
  options.interval_s = 1.0;
  DeviceMetrics metrics(rig.set, cpus.cpus, options);

  rig.gpus[0]->set_utilization(1.0);
  rig.clock->advance_s(10.0);
  zeus::testing::write_file(dir.path() / "intel-rapl:0" / "energy_uj", "51000000");  // +50 J
  metrics.sample_once();
  std::string text;
  metrics.render(text);
  expect_valid_exposition(text);

  const double gpu0_j = *sample(text, R"(zeus_gpu_energy_joules_total{index="0"})");
  EXPECT_NEAR(gpu0_j, 4000.0, 4.0);  // 400 W x 10 s
  EXPECT_NEAR(*sample(text, R"(zeus_gpu_energy_joules_total{index="1"})"), 550.0, 1.0);
  EXPECT_NEAR(*sample(text, R"(power_monitor_gpu_power_watts{index="0",domain="device_instant"})"),
              400.0, 1.0);
  EXPECT_EQ(*sample(text, R"(zeus_gpu_power_limit_watts{index="1"})"), 400.0);
  EXPECT_TRUE(sample(text, R"(zeus_gpu_temperature_celsius{index="0"})"));
  EXPECT_NE(text.find(R"(zeus_gpu_info{index="0",name="NVIDIA A100-SXM4-80GB")"),
            std::string::npos);
  EXPECT_NE(text.find(R"(power_scope="gpu",energy_scope="gpu"} 1)"), std::string::npos) << text;
  EXPECT_EQ(*sample(text, R"(zeus_cpu_energy_joules_total{index="0"})"), 50.0);
  EXPECT_EQ(*sample(text, R"(zeus_dram_energy_joules_total{index="0"})"), 0.0);
  EXPECT_EQ(*sample(text, R"(zeus_cpu_power_watts{index="0",domain="package"})"), 5.0);
  EXPECT_EQ(*sample(text, R"(zeus_device_read_errors_total{device="gpu0"})"), 0.0);

  // Counters never go down.
  rig.clock->advance_s(1.0);
  metrics.sample_once();
  text.clear();
  metrics.render(text);
  EXPECT_GT(*sample(text, R"(zeus_gpu_energy_joules_total{index="0"})"), gpu0_j);
}

// A GPU that fails reads for a while: its series hold their last values, each interval with a
// failure counts once, and the other GPU is not affected.
// A Grace superchip's NVML reports the whole module (devices.md, "module scope"): its info
// series says so, so that a dashboard does not add a CPU figure on top of its energy.
TEST(DeviceMetrics, TheInfoSeriesSaysAGraceSuperchipMeasuresItsWholeModule) {
  auto clock = std::make_shared<zeus::ManualClock>();
  device::SimulatedGpuModel model = device::simulated_gpu_model("h200");
  model.scope = device::MeasuredScope::kModule;
  auto gpu = std::make_shared<device::SimulatedGpu>(model, 0, clock);
  DeviceMetricsOptions options;
  options.clock = clock;
  options.start_thread = false;
  DeviceMetrics metrics(device::Gpus(std::vector<std::shared_ptr<device::Gpu>>{gpu}, {0}), {},
                        options);
  metrics.sample_once();
  std::string text;
  metrics.render(text);
  expect_valid_exposition(text);
  EXPECT_NE(text.find(R"(power_scope="module",energy_scope="module"} 1)"), std::string::npos)
      << text;
}

TEST(DeviceMetrics, FailedReadsAreCountedAndTheLastValuesHeld) {
  SimulatedRig rig(2, "a100");
  auto flaky = std::make_shared<device::FaultInjectingGpu>(rig.gpus[1]);
  const device::Gpus gpus({rig.gpus[0], flaky}, {0, 1});
  DeviceMetricsOptions options;
  options.clock = rig.clock;
  options.start_thread = false;
  DeviceMetrics metrics(gpus, {}, options);
  rig.clock->advance_s(1.0);
  metrics.sample_once();
  std::string before;
  metrics.render(before);
  const double power_w =
      *sample(before, R"(power_monitor_gpu_power_watts{index="1",domain="device_instant"})");
  flaky->fail_after(flaky->calls(), ErrorKind::kUnknown);
  for (int interval = 0; interval < 2; ++interval) {
    rig.clock->advance_s(1.0);
    metrics.sample_once();
  }
  std::string text;
  metrics.render(text);
  expect_valid_exposition(text);
  EXPECT_EQ(*sample(text, R"(zeus_device_read_errors_total{device="gpu1"})"), 2.0);
  EXPECT_EQ(*sample(text, R"(zeus_device_read_errors_total{device="gpu0"})"), 0.0);
  EXPECT_EQ(*sample(text, R"(power_monitor_gpu_power_watts{index="1",domain="device_instant"})"),
            power_w);
  EXPECT_EQ(*sample(text, R"(zeus_gpu_power_limit_watts{index="1"})"), 400.0);
  EXPECT_GT(*sample(text, R"(zeus_gpu_energy_joules_total{index="0"})"),
            *sample(before, R"(zeus_gpu_energy_joules_total{index="0"})"));
}

TEST(DeviceMetrics, BadOptionsAreRefused) {
  SimulatedRig rig(1, "a100");
  DeviceMetricsOptions options;
  options.start_thread = false;
  options.gpu_indices = std::vector<int>{3};
  EXPECT_THROW(DeviceMetrics(rig.set, {}, options), Error);
  options.gpu_indices.reset();
  options.interval_s = 0.0;
  EXPECT_THROW(DeviceMetrics(rig.set, {}, options), Error);
  options.interval_s = 86401.0;
  EXPECT_THROW(DeviceMetrics(rig.set, {}, options), Error);
}

TEST(MetricsServer, ServesTheSourcesAndCountsScrapes) {
  MetricsServer server("127.0.0.1", 0, {[](std::string& out) {
                         write_family_header(out, "demo_value", "gauge", "A value");
                         out.append("demo_value 42\n");
                       }});
  ASSERT_GT(server.port(), 0);
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  auto first = client.Get("/metrics");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(first->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(sample(first->body, "demo_value"), 42);
  expect_valid_exposition(first->body);
  auto second = client.Get("/metrics");
  ASSERT_TRUE(second);
  EXPECT_EQ(sample(second->body, "zeus_exporter_scrapes_total"), 2);
  auto missing = client.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  server.stop();
}

TEST(MetricsServer, PortInUseIsAClearError) {
  MetricsServer first("127.0.0.1", 0, {});
  try {
    MetricsServer second("127.0.0.1", first.port(), {});
    FAIL() << "bound a port in use";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kIo);
    EXPECT_NE(std::string(error.what()).find("already in use"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find(std::to_string(first.port())), std::string::npos);
  }
  EXPECT_THROW(MetricsServer("127.0.0.1", 70000, {}), Error);
}

TEST(MetricsServer, ZeusMonitorWindowsFeedTheHistograms) {
  SimulatedRig rig(1, "a100");
  auto histograms = std::make_shared<WindowHistograms>();
  monitor::ZeusMonitorOptions options;
  options.clock = rig.clock;
  options.start_sampler_thread = false;
  options.on_window_end = [histograms](const std::string& window, const monitor::Measurement& m) {
    histograms->observe(window, m);
  };
  monitor::ZeusMonitor monitor(rig.set, {}, options);
  for (int step = 0; step < 3; ++step) {
    monitor.begin_window("step");
    rig.clock->advance_s(2.0);  // 55 W idle: 110 J
    monitor.end_window("step");
  }
  monitor.begin_window("step");
  monitor.end_window("step", {.cancel = true});  // not observed
  std::string text;
  histograms->render(text);
  EXPECT_EQ(sample(text, R"(energy_monitor_gpu_energy_joules_count{window="step",index="0"})"), 3);
  EXPECT_EQ(
      sample(text, R"(energy_monitor_gpu_energy_joules_bucket{window="step",index="0",le="100"})"),
      0);
  EXPECT_EQ(
      sample(text, R"(energy_monitor_gpu_energy_joules_bucket{window="step",index="0",le="200"})"),
      3);
  EXPECT_NEAR(*sample(text, R"(zeus_window_duration_seconds_sum{window="step"})"), 6.0, 1e-9);
}

}  // namespace
}  // namespace zeus::metrics
