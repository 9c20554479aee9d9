// `zeus exporter --slurm-state-dir`'s collector: the Slurm steps' state files as the SPANK plugin
// writes them (slurm::write_step_state), their counters read through a real zeusd on simulated
// H200s, and what a dead step, a bad file, a counter gone back or zeusd gone leave out.
#include "metrics/slurm_metrics.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "device/zeusd_connection.hpp"
#include "exposition_check.hpp"
#include "slurm/step_session.hpp"
#include "support/fault_injecting_gpu.hpp"
#include "support/running_daemon.hpp"
#include "support/spawned_process.hpp"
#include "support/temp_dir.hpp"
#include "zeus/metrics/metrics_server.hpp"

namespace zeus::metrics {
namespace {

using nlohmann::json;

constexpr std::string_view kEnergy = "zeus_slurm_step_gpu_energy_joules";
constexpr std::string_view kLimit = "zeus_slurm_step_gpu_power_limit_watts";
constexpr std::string_view kStart = "zeus_slurm_step_start_timestamp_seconds";

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The series name{job_id,step,node[,gpu,user]} as rendered.
std::string series(std::string_view name, std::uint32_t job, const std::string& step, int gpu) {
  std::string out = std::string(name) + "{job_id=\"" + std::to_string(job) + "\",step=\"" + step +
                    "\",node=\"n1\"";
  if (gpu >= 0) {
    out += ",gpu=\"" + std::to_string(gpu) + "\",user=\"1000\"";
  }
  return out + "}";
}

// Sample lines (not comments) that start with `prefix`.
int count_samples(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    count += line.rfind(prefix, 0) == 0 ? 1 : 0;
  }
  return count;
}

class SlurmMetricsTest : public ::testing::Test {
 protected:
  device::ZeusdConfig zeusd_config() const {
    device::ZeusdConfig config;
    config.socket_path = zeusd_->socket();
    return config;
  }

  // GPU `id`'s counter read through zeusd, as the plugin reads it at the step's start.
  std::uint64_t energy_mj(int id) {
    device::ZeusdConnection connection(zeusd_config());
    const json body = json::parse(connection.get(
        "read the counter", "/gpu/get_cumulative_energy?gpu_ids=" + std::to_string(id)));
    return body.at(std::to_string(id)).at("energy_mj").get<std::uint64_t>();
  }

  // A running step of this test process on node n1, uid 1000, its state file written.
  slurm::StepState start_step(std::uint32_t job, const std::string& step,
                              const std::vector<int>& gpus, std::optional<std::uint32_t> cap_mw,
                              pid_t owner = ::getpid()) {
    slurm::StepState state;
    state.job_id = job;
    state.step = step;
    state.node = "n1";
    state.uid = 1000;
    state.owner_pid = owner;
    state.zeusd = zeusd_config().describe();
    state.start_unix_s = 1700000000.5;
    state.start_monotonic_s = slurm::monotonic_s();
    for (const int id : gpus) {
      slurm::StepGpu gpu;
      gpu.index = id;
      gpu.start_energy_mj = id < 4 ? std::optional(energy_mj(id)) : std::optional<std::uint64_t>(1);
      gpu.prior_power_limit_mw = 700000;
      gpu.cap_mw = cap_mw;
      gpu.capped_here = cap_mw.has_value();
      state.gpus.push_back(gpu);
    }
    slurm::write_step_state(state_dir(), state);
    return state;
  }

  SlurmMetrics collector(std::optional<device::ZeusdConfig> zeusd = std::nullopt) const {
    SlurmMetricsOptions options;
    options.state_dir = state_dir();
    options.zeusd = zeusd ? *zeusd : zeusd_config();
    options.start_thread = false;
    return SlurmMetrics(std::move(options));
  }

  static std::string rendered(const SlurmMetrics& metrics) {
    std::string text;
    metrics.render(text);
    expect_valid_exposition(text);
    return text;
  }

  std::string state_dir() const { return (dir_.path() / "state").string(); }
  void write_file(const std::string& name, const std::string& text) {
    std::ofstream(dir_.path() / "state" / name) << text;
  }

  zeus::testing::TempDir dir_;
  std::unique_ptr<daemon::Running> zeusd_ =
      std::make_unique<daemon::Running>(daemon::DaemonConfig{}, 4);
};

static_assert(kMaxSlurmStateFiles == 4096);

// Each running step's GPUs: energy since its start read through zeusd (the simulated H200 idles
// at 75 W, so it is 75 W times the time between the two reads), its cap, its start time.
TEST_F(SlurmMetricsTest, ExportsEachRunningStepsGpusWithItsJobAndStep) {
  const double idle_w = device::simulated_gpu_model("h200").idle_power_mw / 1000.0;
  const double first_start = now_s();
  const auto step = start_step(12, "0", {0, 2}, 250000);
  start_step(13, "batch", {1}, std::nullopt);
  const double last_start = now_s();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  SlurmMetrics metrics = collector();
  const std::uint64_t before_mj = zeusd_->gpu(0).total_energy_mj();
  const double before = now_s();
  metrics.collect_once();
  const double after = now_s();
  const std::uint64_t after_mj = zeusd_->gpu(0).total_energy_mj();
  const std::string text = rendered(metrics);
  EXPECT_EQ(metrics.last_failure(), std::nullopt);

  const auto energy = sample(text, series(kEnergy, 12, "0", 0));
  ASSERT_TRUE(energy) << text;
  // The counter zeusd read lies between the two read here, less the one at the step's start.
  const double start_j = static_cast<double>(*step.gpus[0].start_energy_mj) / 1000.0;
  EXPECT_GE(*energy + 1e-9, static_cast<double>(before_mj) / 1000.0 - start_j);
  EXPECT_LE(*energy - 1e-9, static_cast<double>(after_mj) / 1000.0 - start_j);
  EXPECT_GE(*energy, idle_w * (before - last_start) * 0.999);
  EXPECT_LE(*energy, idle_w * (after - first_start) * 1.001);
  EXPECT_GE(*energy, idle_w * 0.3 * 0.999);
  for (const auto& [job, name, gpu] : {std::tuple(12u, "0", 2), std::tuple(13u, "batch", 1)}) {
    const auto joules = sample(text, series(kEnergy, job, name, gpu));
    ASSERT_TRUE(joules) << text;
    EXPECT_GE(*joules, idle_w * 0.3 * 0.999);
    EXPECT_LE(*joules, idle_w * (after - first_start) * 1.001);
  }
  // Caps where the step holds one, and only there.
  EXPECT_EQ(sample(text, series(kLimit, 12, "0", 0)), 250.0);
  EXPECT_EQ(sample(text, series(kLimit, 12, "0", 2)), 250.0);
  EXPECT_EQ(sample(text, series(kLimit, 13, "batch", 1)), std::nullopt);
  EXPECT_EQ(sample(text, series(kStart, 12, "0", -1)), 1700000000.5);
  EXPECT_EQ(sample(text, series(kStart, 13, "batch", -1)), 1700000000.5);
  EXPECT_EQ(count_samples(text, std::string(kEnergy)), 3);
  EXPECT_EQ(sample(text, "zeus_slurm_collection_failures_total"), 0.0);

  // A step that ended (its file removed) is gone at the next collection.
  slurm::remove_step_state(state_dir(), step);
  metrics.collect_once();
  const std::string later = rendered(metrics);
  EXPECT_EQ(count_samples(later, std::string(kEnergy)), 1) << later;
  EXPECT_EQ(count_samples(later, std::string(kStart)), 1) << later;
}

// A step whose slurmstepd is gone, a half-written or foreign file, a second file of the same
// step and a GPU zeusd does not have leave out only themselves.
TEST_F(SlurmMetricsTest, SkipsDeadStepsBadFilesDuplicatesAndUnknownGpus) {
  start_step(12, "0", {0}, std::nullopt);
  start_step(14, "0", {1}, 300000, zeus::testing::reaped_pid());
  start_step(15, "extern", {3, 99}, 300000);
  write_file("job-77.step-0.json", "{\"job_id\": 77, \"step\": ");
  write_file("job-78.step-0.json", "{\"job_id\": 78}");
  write_file("job-79.step-0.json", "[1, 2, 3]");
  {
    std::ifstream in(slurm::state_file_path(state_dir(), 12, "0"));
    std::ostringstream copy;
    copy << in.rdbuf();
    write_file("job-12.step-0-copy.json", copy.str());
  }
  SlurmMetrics metrics = collector();
  metrics.collect_once();
  const std::string text = rendered(metrics);
  EXPECT_EQ(metrics.last_failure(), std::nullopt);
  EXPECT_TRUE(sample(text, series(kEnergy, 12, "0", 0))) << text;
  EXPECT_EQ(count_samples(text, series(kEnergy, 12, "0", 0)), 1) << text;
  EXPECT_EQ(count_samples(text, series(kStart, 12, "0", -1)), 1) << text;
  EXPECT_EQ(text.find("job_id=\"14\""), std::string::npos) << text;
  for (const char* job : {"77", "78", "79"}) {
    EXPECT_EQ(text.find("job_id=\"" + std::string(job) + "\""), std::string::npos) << text;
  }
  EXPECT_TRUE(sample(text, series(kEnergy, 15, "extern", 3))) << text;
  EXPECT_EQ(text.find("gpu=\"99\""), std::string::npos) << text;
}

// A counter below the step's start (GPU reset, zeusd restarted) gives no energy, not a wrapped
// or negative one; the step's other series stay.
TEST_F(SlurmMetricsTest, CounterGoneBackGivesNoEnergySample) {
  slurm::StepState state = start_step(12, "0", {0, 1}, 250000);
  state.gpus[0].start_energy_mj = *state.gpus[0].start_energy_mj + 1000000000000ULL;
  slurm::write_step_state(state_dir(), state);
  SlurmMetrics metrics = collector();
  metrics.collect_once();
  const std::string text = rendered(metrics);
  EXPECT_EQ(sample(text, series(kEnergy, 12, "0", 0)), std::nullopt) << text;
  EXPECT_TRUE(sample(text, series(kEnergy, 12, "0", 1))) << text;
  EXPECT_EQ(sample(text, series(kLimit, 12, "0", 0)), 250.0);
  EXPECT_EQ(sample(text, series(kStart, 12, "0", -1)), 1700000000.5);
}

// A GPU whose counter read fails on zeusd makes it refuse a read of several GPUs: the others
// still count (each read alone), the failing one gives no energy.
TEST_F(SlurmMetricsTest, OneGpuFailingOnZeusdLeavesOutOnlyItsEnergy) {
  std::vector<std::shared_ptr<device::Gpu>> gpus;
  std::shared_ptr<device::FaultInjectingGpu> broken;
  for (int i = 0; i < 3; ++i) {
    auto gpu = std::make_shared<device::SimulatedGpu>(device::simulated_gpu_model("h200"), i,
                                                      steady_clock());
    if (i == 1) {
      broken = std::make_shared<device::FaultInjectingGpu>(gpu);
      gpus.push_back(broken);
    } else {
      gpus.push_back(gpu);
    }
  }
  zeusd_ = std::make_unique<daemon::Running>(device::Gpus(gpus, {0, 1, 2}), daemon::DaemonConfig{});
  start_step(12, "0", {0, 1, 2}, 250000);
  broken->set_hook([](std::string_view method) {
    if (method == "total_energy_mj") {
      throw Error(ErrorKind::kGpuLost, "fell off the bus");
    }
  });
  SlurmMetrics metrics = collector();
  metrics.collect_once();
  const std::string text = rendered(metrics);
  EXPECT_EQ(metrics.last_failure(), std::nullopt);
  EXPECT_TRUE(sample(text, series(kEnergy, 12, "0", 0))) << text;
  EXPECT_EQ(sample(text, series(kEnergy, 12, "0", 1)), std::nullopt) << text;
  EXPECT_TRUE(sample(text, series(kEnergy, 12, "0", 2))) << text;
  EXPECT_EQ(sample(text, series(kLimit, 12, "0", 1)), 250.0) << text;
}

// zeusd unreachable: no Slurm series at all (not stale ones), the reason kept and counted, and a
// scrape still answers 200 at once.
TEST_F(SlurmMetricsTest, ZeusdUnreachableLeavesNoSlurmSeriesAndTheScrapeAnswers) {
  start_step(12, "0", {0}, 250000);
  SlurmMetrics metrics = collector();
  metrics.collect_once();
  ASSERT_TRUE(sample(rendered(metrics), series(kEnergy, 12, "0", 0)));

  zeusd_.reset();
  metrics.collect_once();
  const std::string text = rendered(metrics);
  EXPECT_EQ(count_samples(text, "zeus_slurm_step_"), 0) << text;
  EXPECT_EQ(sample(text, "zeus_slurm_collection_failures_total"), 1.0);
  ASSERT_TRUE(metrics.last_failure());
  EXPECT_NE(metrics.last_failure()->find("unreachable"), std::string::npos)
      << *metrics.last_failure();

  MetricsServer server("127.0.0.1", 0, {[&metrics](std::string& out) { metrics.render(out); }});
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(5, 0);
  const auto started = std::chrono::steady_clock::now();
  const auto response = client.Get("/metrics");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  EXPECT_NE(response->body.find("# TYPE zeus_slurm_step_gpu_energy_joules gauge"),
            std::string::npos);
  EXPECT_EQ(count_samples(response->body, "zeus_slurm_step_"), 0);
  server.stop();
}

// The reason is logged at most once a minute however often the collections fail.
TEST_F(SlurmMetricsTest, LogsWhyAtMostOnceAMinute) {
  start_step(12, "0", {0}, std::nullopt);
  auto clock = std::make_shared<ManualClock>(1000000000);
  SlurmMetricsOptions options;
  options.state_dir = state_dir();
  options.zeusd.socket_path = (dir_.path() / "no-zeusd.sock").string();
  options.clock = clock;
  options.start_thread = false;
  SlurmMetrics metrics(std::move(options));
  const auto logged = [&](int collections) {
    ::testing::internal::CaptureStderr();
    for (int i = 0; i < collections; ++i) {
      metrics.collect_once();
      clock->advance_s(10.0);
    }
    const std::string err = ::testing::internal::GetCapturedStderr();
    return count_samples(err, "[zeus W] exporter: no Slurm series from ");
  };
  EXPECT_EQ(logged(6), 1);  // 0 s .. 50 s
  EXPECT_EQ(logged(6), 1);  // 60 s .. 110 s
  EXPECT_EQ(sample(rendered(metrics), "zeus_slurm_collection_failures_total"), 12.0);
}

// No state directory yet (no step ran on this node): no series and no failure, and zeusd is not
// asked (here there is none).
TEST_F(SlurmMetricsTest, NoStateDirectoryIsNoStep) {
  device::ZeusdConfig nowhere;
  nowhere.socket_path = (dir_.path() / "no-zeusd.sock").string();
  SlurmMetrics metrics = collector(nowhere);
  metrics.collect_once();
  EXPECT_EQ(metrics.last_failure(), std::nullopt);
  EXPECT_EQ(count_samples(rendered(metrics), "zeus_slurm_step_"), 0);
}

// More state files than the bound: none is read, and the reason says so.
TEST_F(SlurmMetricsTest, MoreStateFilesThanTheBoundAreNotRead) {
  for (std::uint32_t job = 1; job <= 3; ++job) {
    start_step(job, "0", {0}, std::nullopt);
  }
  SlurmMetricsOptions options;
  options.state_dir = state_dir();
  options.zeusd = zeusd_config();
  options.max_state_files = 3;
  options.start_thread = false;
  SlurmMetrics metrics(std::move(options));
  metrics.collect_once();
  EXPECT_EQ(count_samples(rendered(metrics), std::string(kEnergy)), 3);
  start_step(4, "0", {0}, std::nullopt);
  metrics.collect_once();
  EXPECT_EQ(count_samples(rendered(metrics), "zeus_slurm_step_"), 0);
  ASSERT_TRUE(metrics.last_failure());
  EXPECT_NE(metrics.last_failure()->find("more than 3 step state files"), std::string::npos)
      << *metrics.last_failure();
}

// At the default bound every step is read (one zeusd read for all of them); one more file and
// none is. The time of a full collection is printed (docs/security.md quotes it).
TEST_F(SlurmMetricsTest, DefaultBoundReadsEveryStepUpToIt) {
  slurm::StepState state = start_step(1, "0", {0}, 250000);
  for (std::uint32_t job = 2; job <= kMaxSlurmStateFiles; ++job) {
    state.job_id = job;
    slurm::write_step_state(state_dir(), state);
  }
  SlurmMetrics metrics = collector();
  const double before = now_s();
  metrics.collect_once();
  const double took = now_s() - before;
  std::string text;
  metrics.render(text);
  EXPECT_EQ(count_samples(text, std::string(kEnergy)), static_cast<int>(kMaxSlurmStateFiles));
  std::cout << "[ figures  ] one collection of " << kMaxSlurmStateFiles << " step files: " << took
            << " s, " << text.size() << " bytes rendered\n";
  state.job_id = kMaxSlurmStateFiles + 1;
  slurm::write_step_state(state_dir(), state);
  metrics.collect_once();
  text.clear();
  metrics.render(text);
  EXPECT_EQ(count_samples(text, "zeus_slurm_step_"), 0);
}

// The collecting thread: series appear without a scrape waiting for them, and stop() returns.
TEST_F(SlurmMetricsTest, CollectsOnItsOwnThread) {
  start_step(12, "0", {0}, std::nullopt);
  SlurmMetricsOptions options;
  options.state_dir = state_dir();
  options.zeusd = zeusd_config();
  options.interval_s = 0.05;
  SlurmMetrics metrics(std::move(options));
  std::optional<double> first;
  for (int i = 0; i < 400 && !first; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::string text;
    metrics.render(text);
    first = sample(text, series(kEnergy, 12, "0", 0));
  }
  ASSERT_TRUE(first);
  std::optional<double> later = first;
  for (int i = 0; i < 400 && later == first; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::string text;
    metrics.render(text);
    later = sample(text, series(kEnergy, 12, "0", 0));
  }
  ASSERT_TRUE(later);
  EXPECT_GT(*later, *first);
  metrics.stop();
}

}  // namespace
}  // namespace zeus::metrics
