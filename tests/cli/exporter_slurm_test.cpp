// `zeus exporter --slurm-state-dir DIR --zeusd-socket PATH` end to end: a real zeusd process on
// four simulated H200s, step state files written as the SPANK plugin writes them (start counters
// read through that zeusd), the exporter process on GPUs of its own (one simulated A100), its
// /metrics scraped; then zeusd killed under it.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "device/zeusd_connection.hpp"
#include "metrics/exposition_check.hpp"
#include "slurm/step_session.hpp"
#include "support/spawned_process.hpp"
#include "support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using zeus::metrics::sample;
using zeus::testing::SpawnedProcess;
using zeus::testing::TempDir;

constexpr double kH200IdleW = 75.0;  // src/device/gpu_models.cpp: the simulated H200's idle draw

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t count = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

struct Scrape {
  int status = 0;
  std::string body;
  double seconds = 0.0;
};

Scrape scrape(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(10, 0);
  const double start = now_s();
  const auto response = client.Get("/metrics");
  Scrape out;
  out.seconds = now_s() - start;
  if (response) {
    out.status = response->status;
    out.body = response->body;
  }
  return out;
}

const std::string kStep42 = R"(job_id="42",step="0",node="n1")";

std::string gpu_series(const std::string& name, int gpu) {
  return name + "{" + kStep42 + ",gpu=\"" + std::to_string(gpu) + "\",user=\"1000\"}";
}

TEST(ExporterSlurm, SeriesPerJobStepAndGpuThroughZeusdAndNoneOnceZeusdIsGone) {
  TempDir dir;
  const std::string socket = (dir.path() / "zeusd.sock").string();
  const std::string state_dir = (dir.path() / "state").string();
  SpawnedProcess zeusd({ZEUSD_PATH, "serve", "--socket-path", socket}, dir.path() / "zeusd.log",
                       {{"ZEUS_SIMULATED_GPUS", "4:h200"}, {"ZEUS_LOG_LEVEL", "info"}});
  for (int i = 0; i < 2000 && zeusd.log().find("listening on") == std::string::npos; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_NE(zeusd.log().find("listening on"), std::string::npos) << zeusd.log();

  // Job 42's step 0 on zeusd's GPUs 1 and 3, capped at 300 W; job 43's batch step, whose
  // slurmstepd is gone; a file that is not JSON.
  zeus::device::ZeusdConfig config;
  config.socket_path = socket;
  zeus::device::ZeusdConnection connection(config);
  const double started = now_s();
  const json start =
      json::parse(connection.get("read the counters", "/gpu/get_cumulative_energy?gpu_ids=0,1,3"));
  zeus::slurm::StepState step;
  step.job_id = 42;
  step.step = "0";
  step.node = "n1";
  step.uid = 1000;
  step.owner_pid = ::getpid();
  step.zeusd = config.describe();
  step.start_unix_s = 1700000000.0;
  step.start_monotonic_s = zeus::slurm::monotonic_s();
  for (const int id : {1, 3}) {
    zeus::slurm::StepGpu gpu;
    gpu.index = id;
    gpu.start_energy_mj = start.at(std::to_string(id)).at("energy_mj").get<std::uint64_t>();
    gpu.prior_power_limit_mw = 700000;
    gpu.cap_mw = 300000;
    gpu.capped_here = true;
    step.gpus.push_back(gpu);
  }
  zeus::slurm::write_step_state(state_dir, step);
  zeus::slurm::StepState dead = step;
  dead.job_id = 43;
  dead.step = "batch";
  dead.owner_pid = zeus::testing::reaped_pid();
  dead.gpus.resize(1);
  dead.gpus[0].index = 0;
  dead.gpus[0].start_energy_mj = start.at("0").at("energy_mj").get<std::uint64_t>();
  zeus::slurm::write_step_state(state_dir, dead);
  std::ofstream(state_dir + "/job-50.step-0.json") << "{\"job_id\": 50,";

  const auto port_file = dir.path() / "port";
  SpawnedProcess exporter(
      {ZEUS_CLI_PATH, "exporter", "--port", "0", "--port-file", port_file.string(), "--cpus",
       "none", "--slurm-state-dir", state_dir, "--zeusd-socket", socket},
      dir.path() / "exporter.log",
      {{"ZEUS_SIMULATED_GPUS", "1:a100"}, {"ZEUS_POWERCAP_ROOT", "/nonexistent"}});
  const int port = zeus::testing::wait_for_port_file(port_file);
  ASSERT_GT(port, 0) << exporter.log();
  EXPECT_NE(exporter.log().find("Slurm steps from " + state_dir + " through zeusd at unix socket " +
                                socket),
            std::string::npos)
      << exporter.log();

  // Until a second of idle energy shows (collections run once a second); never more than the
  // GPU's idle draw over the time since the step's start.
  std::optional<double> energy;
  Scrape last;
  const double deadline = now_s() + 20.0;
  while (now_s() < deadline && !(energy && *energy >= kH200IdleW)) {
    std::this_thread::sleep_for(100ms);
    last = scrape(port);
    ASSERT_EQ(last.status, 200) << exporter.log();
    energy = sample(last.body, gpu_series("zeus_slurm_step_gpu_energy_joules", 1));
    if (energy) {
      EXPECT_LE(*energy, kH200IdleW * (now_s() - started) * 1.001) << last.body;
    }
  }
  ASSERT_TRUE(energy && *energy >= kH200IdleW) << last.body << exporter.log();
  const auto energy3 = sample(last.body, gpu_series("zeus_slurm_step_gpu_energy_joules", 3));
  ASSERT_TRUE(energy3) << last.body;  // zeusd's GPU 3: the exporter itself has one GPU
  EXPECT_GT(*energy3, 0.0);
  EXPECT_LE(*energy3, kH200IdleW * (now_s() - started) * 1.001);
  EXPECT_EQ(sample(last.body, gpu_series("zeus_slurm_step_gpu_power_limit_watts", 1)), 300.0);
  EXPECT_EQ(sample(last.body, gpu_series("zeus_slurm_step_gpu_power_limit_watts", 3)), 300.0);
  EXPECT_EQ(sample(last.body, "zeus_slurm_step_start_timestamp_seconds{" + kStep42 + "}"),
            1700000000.0);
  EXPECT_EQ(last.body.find("job_id=\"43\""), std::string::npos) << last.body;
  EXPECT_EQ(last.body.find("job_id=\"50\""), std::string::npos) << last.body;
  EXPECT_NE(last.body.find("zeus_gpu_energy_joules_total{index=\"0\"}"), std::string::npos);
  EXPECT_EQ(last.body.find("zeus_gpu_energy_joules_total{index=\"1\"}"), std::string::npos);

  // zeusd gone: every scrape still answers 200 at once, the Slurm series go, the reason is
  // logged once.
  zeusd.signal(SIGKILL);
  ASSERT_TRUE(zeusd.wait_for(10s));
  bool gone = false;
  const double gone_deadline = now_s() + 20.0;
  while (now_s() < gone_deadline && !gone) {
    std::this_thread::sleep_for(100ms);
    last = scrape(port);
    ASSERT_EQ(last.status, 200) << exporter.log();
    EXPECT_LT(last.seconds, 5.0);
    gone = last.body.find("zeus_slurm_step_gpu_energy_joules{") == std::string::npos &&
           last.body.find("zeus_slurm_step_start_timestamp_seconds{") == std::string::npos;
  }
  ASSERT_TRUE(gone) << last.body;
  EXPECT_NE(last.body.find("zeus_gpu_energy_joules_total{index=\"0\"}"), std::string::npos);
  std::this_thread::sleep_for(2500ms);  // two or three more failed collections
  last = scrape(port);
  EXPECT_EQ(last.status, 200);
  EXPECT_GE(sample(last.body, "zeus_slurm_collection_failures_total").value_or(0.0), 2.0);
  EXPECT_EQ(occurrences(exporter.log(), "no Slurm series from " + state_dir), 1u) << exporter.log();
  EXPECT_NE(exporter.log().find("unreachable"), std::string::npos) << exporter.log();

  exporter.signal(SIGTERM);
  const auto status = exporter.wait_for(15s);
  ASSERT_TRUE(status) << exporter.log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << exporter.log();
}

// --zeusd-socket means nothing without --slurm-state-dir: refused at once.
TEST(ExporterSlurm, ZeusdSocketNeedsTheStateDir) {
  TempDir dir;
  SpawnedProcess exporter({ZEUS_CLI_PATH, "exporter", "--port", "0", "--zeusd-socket", "/x.sock"},
                          dir.path() / "exporter.log", {{"ZEUS_SIMULATED_GPUS", "1:a100"}});
  const auto status = exporter.wait_for(15s);
  ASSERT_TRUE(status) << exporter.log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) != 0) << exporter.log();
  EXPECT_NE(exporter.log().find("--slurm-state-dir"), std::string::npos) << exporter.log();
}

}  // namespace
