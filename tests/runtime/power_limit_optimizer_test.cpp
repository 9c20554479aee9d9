#include "zeus/runtime/power_limit_optimizer.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "support/shared_data.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpu_provider.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/replay_monitor.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using zeus::runtime::PowerLimitOptimizer;
using zeus::runtime::PowerLimitOptimizerOptions;

fs::path profiles_dir() {
  return zeus::testing::shared_data_dir() / "plo-profiles";
}

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("zeus-plo-" + std::to_string(getpid()) + "-" + name);
}

// The fake libnvidia-ml, configured with `count` Volta GPUs of the given range.
class FakeNvml {
 public:
  FakeNvml() {
    handle_ = dlopen(ZEUS_FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
    configure_ = reinterpret_cast<int (*)(const char*)>(dlsym(handle_, "fake_nvml_configure"));
    state_ = reinterpret_cast<const char* (*)()>(dlsym(handle_, "fake_nvml_state"));
  }
  ~FakeNvml() { dlclose(handle_); }
  zeus::device::Gpus open(int count, int min_w, int max_w) {
    json devices = json::array();
    for (int i = 0; i < count; ++i) {
      devices.push_back({{"name", "Tesla V100"},
                         {"uuid", "GPU-" + std::to_string(i)},
                         {"architecture", 5},
                         {"power_limit_min_mw", min_w * 1000},
                         {"power_limit_max_mw", max_w * 1000},
                         {"power_limit_default_mw", max_w * 1000},
                         {"power_limit_mw", max_w * 1000},
                         {"power_usage_mw", 100000},
                         {"energy_mj", 0}});
    }
    configure_(json{{"devices", devices}}.dump().c_str());
    nvml_ = zeus::device::open_nvml(ZEUS_FAKE_NVML_PATH);
    std::vector<std::shared_ptr<zeus::device::Gpu>> gpus;
    std::vector<int> indices;
    for (int i = 0; i < count; ++i) {
      gpus.push_back(nvml_->open_gpu(i));
      indices.push_back(i);
    }
    return zeus::device::Gpus(gpus, indices);
  }
  std::vector<int> history_w(int device) const {
    const json state = json::parse(state_());
    std::vector<int> watts;
    for (const auto& mw :
         state["devices"][device].value("set_power_limit_history_mw", json::array())) {
      watts.push_back(mw.get<int>() / 1000);
    }
    return watts;
  }
  int limit_w(int device) const {
    return json::parse(state_())["devices"][device]["power_limit_mw"].get<int>() / 1000;
  }

 private:
  void* handle_;
  int (*configure_)(const char*);
  const char* (*state_)();
  std::shared_ptr<zeus::device::GpuProvider> nvml_;
};

struct Scenario {
  const char* name;
  int steps_per_epoch;
  int epochs;
};

// The reference's four scenarios for |P| power limits.
std::vector<Scenario> scenarios(int limits) {
  return {{"none", 50 * limits + 10, 3},
          {"warmup", 50 * (limits / 2) + 5, 4},
          {"profiling", 50 * (limits / 3) + 15, 5},
          {"every", 100, limits + 2}};
}

// The expected sequence of power-limit settings at the driver, from the rules alone: wait 1 step,
// then per limit 10 warm-up steps and a 40-step window; an epoch end inside warm-up or a window
// sets the maximum and retries that limit at the next step. The GPU starts at the maximum, and a
// setting equal to the current limit never reaches the driver.
std::vector<int> expected_settings(const std::vector<int>& limits_w, const Scenario& scenario,
                                   int optimum_w) {
  std::vector<int> settings;
  int current = limits_w.front();
  const auto set = [&](int w) {
    if (w != current) {
      settings.push_back(w);
      current = w;
    }
  };
  std::size_t index = 0;
  int phase_steps = 1;  // steps left before the limit at `index` is set (the wait step)
  int progress = -1;    // steps done at the limit since it was set; -1 = not set yet
  for (int epoch = 0; epoch < scenario.epochs && index < limits_w.size(); ++epoch) {
    for (int step = 0; step < scenario.steps_per_epoch && index < limits_w.size(); ++step) {
      if (progress < 0) {
        if (--phase_steps > 0) {
          continue;
        }
        set(limits_w[index]);
        progress = 0;
        continue;
      }
      if (++progress == 50) {  // 10 warm-up + 40 profiled steps after the one that set it
        ++index;
        if (index == limits_w.size()) {
          set(optimum_w);
        } else {
          set(limits_w[index]);
          progress = 0;
        }
      }
    }
    if (index < limits_w.size() && progress >= 0) {
      set(limits_w.front());  // interrupted: back to the maximum, retry at the next step
      progress = -1;
      phase_steps = 1;
    }
  }
  return settings;
}

struct ProfileFile {
  std::string name;
  int gpus = 0;
  std::vector<int> limits_w;
};

std::vector<ProfileFile> profile_files() {
  std::vector<ProfileFile> files;
  for (const auto& entry : fs::directory_iterator(profiles_dir())) {
    std::ifstream in(entry.path());
    std::string header, line;
    std::getline(in, header);
    ProfileFile file;
    file.name = entry.path().string();
    file.gpus = static_cast<int>(std::count(header.begin(), header.end(), ',')) - 2;
    while (std::getline(in, line)) {
      const auto first = line.find(',');
      const auto second = line.find(',', first + 1);
      const std::string window = line.substr(first + 1, second - first - 1);
      file.limits_w.push_back(std::stoi(window.substr(window.rfind('_') + 1)));
    }
    files.push_back(file);
  }
  std::sort(files.begin(), files.end(), [](auto& a, auto& b) { return a.name < b.name; });
  return files;
}

class ReplayedProfiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(profiles_dir())) {
      GTEST_SKIP() << "../shared/data/plo-profiles is absent; skipping the replay tests";
    }
  }
};

TEST_F(ReplayedProfiles, SelectedLimitsAndExactSettingSequences) {
  FakeNvml fake;
  int runs = 0;
  for (const ProfileFile& file : profile_files()) {
    for (const double eta : {0.0, 0.25, 0.5, 0.75, 1.0}) {
      for (const Scenario& scenario : scenarios(static_cast<int>(file.limits_w.size()))) {
        const zeus::device::Gpus gpus =
            fake.open(file.gpus, file.limits_w.back(), file.limits_w.front());
        auto monitor = std::make_shared<zeus::monitor::ReplayMonitor>(file.name, false);
        PowerLimitOptimizerOptions options;
        options.selector = std::make_shared<zeus::optimizer::ZeusCostSelector>(eta, file.gpus);
        options.restore_on_signal = false;
        std::optional<std::uint32_t> optimum_mw;
        {
          PowerLimitOptimizer optimizer(monitor, gpus, options);
          std::vector<int> expected_limits_mw;
          for (const int w : file.limits_w) {
            expected_limits_mw.push_back(w * 1000);
          }
          ASSERT_EQ(std::vector<int>(optimizer.power_limits_mw().begin(),
                                     optimizer.power_limits_mw().end()),
                    expected_limits_mw);
          for (int epoch = 0; epoch < scenario.epochs; ++epoch) {
            for (int step = 0; step < scenario.steps_per_epoch; ++step) {
              optimizer.on_step_begin();
              optimizer.on_step_end();
            }
            optimizer.on_epoch_end();
          }
          optimum_mw = optimizer.optimal_power_limit_mw();
          ASSERT_TRUE(optimum_mw.has_value()) << file.name << " " << scenario.name;
          // The selection equals the policy core's choice over the file's measurements.
          zeus::monitor::ReplayMonitor rows(file.name, false);
          std::vector<zeus::optimizer::PowerLimitMeasurement> measurements;
          for (const auto& row : rows.rows()) {
            double energy = 0.0;
            for (const double e : row.gpu_energy_j) {
              energy += e;
            }
            measurements.push_back(
                {std::stoi(row.window_name.substr(row.window_name.rfind('_') + 1)), energy,
                 row.elapsed_time_s});
          }
          EXPECT_EQ(static_cast<int>(*optimum_mw / 1000),
                    zeus::optimizer::ZeusCostSelector(eta, file.gpus).select(measurements));
          EXPECT_EQ(optimizer.measurements().size(), file.limits_w.size());
        }
        const std::vector<int> expected =
            expected_settings(file.limits_w, scenario, static_cast<int>(*optimum_mw / 1000));
        for (int gpu = 0; gpu < file.gpus; ++gpu) {
          std::vector<int> history = fake.history_w(gpu);
          // The destructor restores the maximum (when the optimum was below it).
          if (static_cast<int>(*optimum_mw / 1000) != file.limits_w.front()) {
            ASSERT_FALSE(history.empty());
            EXPECT_EQ(history.back(), file.limits_w.front());
            history.pop_back();
          }
          EXPECT_EQ(history, expected) << file.name << " eta " << eta << " " << scenario.name;
        }
        ++runs;
      }
    }
  }
  EXPECT_EQ(runs, 12 * 5 * 4);
}

TEST(ExpectedSettings, MatchTheHandDerivedSequenceForSevenLimits) {
  const std::vector<int> limits = {250, 225, 200, 175, 150, 125, 100};
  // 100 steps per epoch: every epoch profiles one limit and is interrupted in the next one.
  EXPECT_EQ(expected_settings(limits, {"every", 100, 9}, 150),
            (std::vector<int>{225, 250, 225, 200, 250, 200, 175, 250, 175, 150, 250, 150, 125, 250,
                              125, 100, 250, 100, 150}));
  EXPECT_EQ(expected_settings(limits, {"none", 360, 3}, 100),
            (std::vector<int>{225, 200, 175, 150, 125, 100}));
}

TEST_F(ReplayedProfiles, ProfileFileIsSavedAndReusedWithEverySelector) {
  const ProfileFile file = profile_files().front();
  FakeNvml fake;
  const fs::path profile = temp_path("profile.json");
  fs::remove(profile);
  const zeus::device::Gpus gpus = fake.open(file.gpus, file.limits_w.back(), file.limits_w.front());
  PowerLimitOptimizerOptions options;
  options.profile_path = profile;
  options.restore_on_signal = false;
  {
    PowerLimitOptimizer optimizer(std::make_shared<zeus::monitor::ReplayMonitor>(file.name, false),
                                  gpus, options);
    for (int step = 0; step < 1000 && !optimizer.optimal_power_limit_mw(); ++step) {
      optimizer.on_step_begin();
    }
  }
  ASSERT_TRUE(fs::exists(profile));
  const zeus::runtime::PowerLimitProfile saved = zeus::runtime::load_power_limit_profile(profile);
  EXPECT_EQ(saved.measurements.size(), file.limits_w.size());
  for (const auto& selector : std::vector<std::shared_ptr<zeus::optimizer::OptimumSelector>>{
           std::make_shared<zeus::optimizer::EnergySelector>(),
           std::make_shared<zeus::optimizer::TimeSelector>(),
           std::make_shared<zeus::optimizer::MaxSlowdownSelector>(1.1)}) {
    options.selector = selector;
    // A loaded profile goes straight to Done: the monitor is never used.
    PowerLimitOptimizer reloaded(std::make_shared<zeus::monitor::ReplayMonitor>(file.name, false),
                                 gpus, options);
    ASSERT_TRUE(reloaded.optimal_power_limit_mw().has_value());
    EXPECT_EQ(static_cast<int>(*reloaded.optimal_power_limit_mw() / 1000),
              selector->select(saved.measurements));
    EXPECT_EQ(fake.limit_w(0), selector->select(saved.measurements));
  }
  fs::remove(profile);
}

// A training loop on one simulated GPU in virtual time: each step is a fixed amount of work whose
// duration stretches as the power limit slows the GPU.
TEST(PowerLimitOptimizerSimulated, FindsTheLimitTheModelSaysIsBest) {
  auto clock = std::make_shared<zeus::ManualClock>();
  auto gpu = std::make_shared<zeus::device::SimulatedGpu>(zeus::device::simulated_gpu_model("a100"),
                                                          0, clock);
  gpu->set_utilization(1.0);
  const zeus::device::Gpus gpus({gpu}, {0});
  zeus::monitor::ZeusMonitorOptions monitor_options;
  monitor_options.clock = clock;
  auto monitor = std::make_shared<zeus::monitor::ZeusMonitor>(
      gpus, std::vector<std::shared_ptr<zeus::device::Cpu>>{}, monitor_options);
  const double step_s = 0.25;
  const double eta = 0.8;
  PowerLimitOptimizerOptions options;
  options.selector = std::make_shared<zeus::optimizer::ZeusCostSelector>(eta, 1);
  options.restore_on_signal = false;
  PowerLimitOptimizer optimizer(monitor, gpus, options);

  // The model's cost per step at every candidate limit.
  int best_w = 0;
  double best_cost = 1e300;
  for (const std::uint32_t limit_mw : optimizer.power_limits_mw()) {
    zeus::device::SimulatedGpu probe(zeus::device::simulated_gpu_model("a100"), 1, clock);
    probe.set_utilization(1.0);
    probe.set_power_limit_mw(limit_mw);
    const double time_s = step_s / probe.relative_speed();
    const double cost =
        eta * probe.instant_power_mw() / 1000.0 * time_s + (1 - eta) * 400.0 * time_s;
    if (cost < best_cost - 1e-9) {
      best_cost = cost;
      best_w = static_cast<int>(limit_mw / 1000);
    }
  }
  for (int step = 0; step < 2000 && !optimizer.optimal_power_limit_mw(); ++step) {
    optimizer.on_step_begin();
    clock->advance_s(step_s / gpu->relative_speed());
  }
  ASSERT_TRUE(optimizer.optimal_power_limit_mw().has_value());
  EXPECT_EQ(static_cast<int>(*optimizer.optimal_power_limit_mw() / 1000), best_w);
  EXPECT_EQ(gpu->power_limit_mw(), *optimizer.optimal_power_limit_mw());
  EXPECT_LT(best_w, 400);  // the model does favour a lower limit at this eta
}

TEST(PowerLimitOptimizerSimulated, DestroyedMidProfilingLeavesNoWindowOpen) {
  auto clock = std::make_shared<zeus::ManualClock>();
  auto gpu = std::make_shared<zeus::device::SimulatedGpu>(zeus::device::simulated_gpu_model("a100"),
                                                          0, clock);
  const zeus::device::Gpus gpus({gpu}, {0});
  zeus::monitor::ZeusMonitorOptions monitor_options;
  monitor_options.clock = clock;
  auto monitor = std::make_shared<zeus::monitor::ZeusMonitor>(
      gpus, std::vector<std::shared_ptr<zeus::device::Cpu>>{}, monitor_options);
  PowerLimitOptimizerOptions options;
  options.restore_on_signal = false;
  for (int run = 0; run < 2; ++run) {
    // The second optimizer on the same monitor must be able to open the same window.
    PowerLimitOptimizer optimizer(monitor, gpus, options);
    for (int step = 0; step < 100 && !std::holds_alternative<zeus::runtime::plo_state::Profiling>(
                                         optimizer.state());
         ++step) {
      optimizer.on_step_begin();
      clock->advance_s(0.1);
    }
    ASSERT_TRUE(std::holds_alternative<zeus::runtime::plo_state::Profiling>(optimizer.state()));
  }
  EXPECT_EQ(gpu->power_limit_mw(), gpu->power_limit_constraints_mw().max_mw);
}

TEST(PowerLimitOptimizerSimulated, WarmupZeroAndRangesThatAreNotMultiplesOfTheStride) {
  auto clock = std::make_shared<zeus::ManualClock>();
  zeus::device::SimulatedGpuModel model = zeus::device::simulated_gpu_model("v100");
  model.max_power_limit_mw = 260'000;
  model.default_power_limit_mw = 260'000;
  auto gpu = std::make_shared<zeus::device::SimulatedGpu>(model, 0, clock);
  const zeus::device::Gpus gpus({gpu}, {0});
  zeus::monitor::ZeusMonitorOptions monitor_options;
  monitor_options.clock = clock;
  auto monitor = std::make_shared<zeus::monitor::ZeusMonitor>(
      gpus, std::vector<std::shared_ptr<zeus::device::Cpu>>{}, monitor_options);
  PowerLimitOptimizerOptions options;
  options.warmup_steps = 0;
  options.profile_steps = 3;
  options.restore_on_signal = false;
  {
    PowerLimitOptimizer optimizer(monitor, gpus, options);
    const std::vector<std::uint32_t> expected = {260'000, 235'000, 210'000, 185'000,
                                                 160'000, 135'000, 110'000, 100'000};
    EXPECT_EQ(optimizer.power_limits_mw(), expected);
    int steps = 0;
    while (!optimizer.optimal_power_limit_mw() && steps < 100) {
      optimizer.on_step_begin();
      clock->advance_s(0.1);
      ++steps;
    }
    // The wait step; the next step sets the first limit and (no warm-up) opens its window; each
    // window spans 3 steps and the step that closes one opens the next.
    EXPECT_EQ(steps, 2 + 8 * 3);
    EXPECT_EQ(optimizer.measurements().size(), 8u);
  }
  EXPECT_EQ(gpu->power_limit_mw(), 260'000u);  // restored when the optimizer goes away
}

TEST(PowerLimitOptimizerErrors, BadInputIsClear) {
  auto clock = std::make_shared<zeus::ManualClock>();
  auto v100 = std::make_shared<zeus::device::SimulatedGpu>(
      zeus::device::simulated_gpu_model("v100"), 0, clock);
  auto a100 = std::make_shared<zeus::device::SimulatedGpu>(
      zeus::device::simulated_gpu_model("a100"), 1, clock);
  const zeus::device::Gpus mixed({v100, a100}, {0, 1});
  auto monitor = std::make_shared<zeus::monitor::ZeusMonitor>(
      mixed, std::vector<std::shared_ptr<zeus::device::Cpu>>{},
      zeus::monitor::ZeusMonitorOptions{});
  try {
    PowerLimitOptimizer optimizer(monitor, mixed, {});
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_NE(std::string(error.what()).find("ranges differ"), std::string::npos);
  }
  PowerLimitOptimizerOptions options;
  options.profile_steps = 0;
  EXPECT_THROW(PowerLimitOptimizer(monitor, mixed, options), zeus::Error);
  options = {};
  options.warmup_steps = -1;
  EXPECT_THROW(PowerLimitOptimizer(monitor, mixed, options), zeus::Error);

  const fs::path bad = temp_path("bad.json");
  for (const std::string text :
       {"not json", "{\"measurements\": []}",
        "{\"measurements\": [{\"power_limit\": 100, \"energy\": -1, \"time\": 1}]}",
        "{\"other\": 1}"}) {
    std::ofstream(bad) << text;
    try {
      zeus::runtime::load_power_limit_profile(bad);
      ADD_FAILURE() << text;
    } catch (const zeus::Error& error) {
      EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find(bad.string()), std::string::npos);
    }
  }
  fs::remove(bad);
  EXPECT_THROW(zeus::runtime::load_power_limit_profile(temp_path("missing.json")), zeus::Error);
}

TEST(PowerLimitOptimizerErrors, AProfileOnSomeProcessesOnlyIsRefused) {
  auto clock = std::make_shared<zeus::ManualClock>();
  auto gpu = std::make_shared<zeus::device::SimulatedGpu>(zeus::device::simulated_gpu_model("v100"),
                                                          0, clock);
  const zeus::device::Gpus gpus({gpu}, {0});
  auto monitor = std::make_shared<zeus::monitor::ZeusMonitor>(
      gpus, std::vector<std::shared_ptr<zeus::device::Cpu>>{}, zeus::monitor::ZeusMonitorOptions{});
  const fs::path profile = temp_path("rank-profile.json");
  zeus::runtime::save_power_limit_profile(profile, {{{250, 10.0, 1.0}, {100, 5.0, 2.0}}});
  PowerLimitOptimizerOptions options;
  options.profile_path = profile;
  options.restore_on_signal = false;
  // Four processes, of which this one and one other have the file.
  options.reducer = std::make_shared<zeus::runtime::CallbackReducer>(
      [](double mine) { return mine + 1.0; }, [](double mine) { return mine; }, 4);
  try {
    PowerLimitOptimizer optimizer(monitor, gpus, options);
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_NE(std::string(error.what()).find("exists for 2 of 4 processes"), std::string::npos)
        << error.what();
  }
  // All four have it: loaded, no profiling.
  options.reducer = std::make_shared<zeus::runtime::CallbackReducer>(
      [](double mine) { return mine * 4.0; }, [](double mine) { return mine; }, 4);
  PowerLimitOptimizer loaded(monitor, gpus, options);
  EXPECT_TRUE(loaded.optimal_power_limit_mw().has_value());
  fs::remove(profile);
}

TEST(PowerLimitOptimizerErrors, NoPermissionSaysHowToFixIt) {
  FakeNvml fake;
  const zeus::device::Gpus gpus = fake.open(1, 100, 250);
  // Fail every setter, as a driver does for an unprivileged process.
  void* handle = dlopen(ZEUS_FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  auto configure = reinterpret_cast<int (*)(const char*)>(dlsym(handle, "fake_nvml_configure"));
  const json device = {{"name", "Tesla V100"},
                       {"uuid", "GPU-0"},
                       {"architecture", 5},
                       {"power_limit_min_mw", 100000},
                       {"power_limit_max_mw", 250000},
                       {"power_limit_default_mw", 250000},
                       {"power_limit_mw", 200000},
                       {"power_usage_mw", 1},
                       {"energy_mj", 0}};
  configure(json{{"devices", {device}}, {"fail", {{"nvmlDeviceSetPowerManagementLimit", 4}}}}
                .dump()
                .c_str());
  auto nvml = zeus::device::open_nvml(ZEUS_FAKE_NVML_PATH);
  const zeus::device::Gpus locked({nvml->open_gpu(0)}, {0});
  auto monitor = std::make_shared<zeus::monitor::ZeusMonitor>(
      locked, std::vector<std::shared_ptr<zeus::device::Cpu>>{},
      zeus::monitor::ZeusMonitorOptions{});
  PowerLimitOptimizerOptions options;
  options.restore_on_signal = false;
  try {
    PowerLimitOptimizer optimizer(monitor, locked, options);
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kNoPermission);
    EXPECT_NE(std::string(error.what()).find("CAP_SYS_ADMIN"), std::string::npos);
  }
  dlclose(handle);
}

// A training process killed with SIGTERM mid-profiling leaves its GPU at the maximum limit; the
// fake driver keeps its state in a file, so it outlives the process.
TEST(PowerLimitOptimizerSignals, SigtermMidProfilingRestoresTheMaximum) {
  const fs::path state = temp_path("nvml-state.json");
  std::ofstream(state) << json{{"devices",
                                {{{"name", "Tesla V100"},
                                  {"uuid", "GPU-0"},
                                  {"architecture", 5},
                                  {"power_limit_min_mw", 100000},
                                  {"power_limit_max_mw", 250000},
                                  {"power_limit_default_mw", 250000},
                                  {"power_limit_mw", 250000},
                                  {"power_usage_mw", 100000},
                                  {"energy_mj", 0},
                                  {"energy_step_mj", 10}}}}}
                              .dump();
  int out_pipe[2];
  ASSERT_EQ(pipe(out_pipe), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    close(out_pipe[0]);
    setenv("ZEUS_FAKE_NVML_STATE_FILE", state.c_str(), 1);
    execl(ZEUS_PLO_CHILD_PATH, ZEUS_PLO_CHILD_PATH, ZEUS_FAKE_NVML_PATH, nullptr);
    _exit(127);
  }
  close(out_pipe[1]);
  FILE* out = fdopen(out_pipe[0], "r");
  char line[128] = {};
  ASSERT_NE(fgets(line, sizeof(line), out), nullptr) << "the child printed nothing";
  EXPECT_EQ(std::string(line).rfind("profiling ", 0), 0u) << line;
  const json during = json::parse(std::ifstream(state));
  EXPECT_LT(during["devices"][0]["power_limit_mw"].get<int>(), 250000);
  kill(child, SIGTERM);
  int status = 0;
  waitpid(child, &status, 0);
  fclose(out);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  const json after = json::parse(std::ifstream(state));
  EXPECT_EQ(after["devices"][0]["power_limit_mw"].get<int>(), 250000);
  fs::remove(state);
}

}  // namespace
