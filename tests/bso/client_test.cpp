// The batch-size-optimizer client against a scripted HTTP peer on a loopback port: the exact
// requests it sends, the lifecycle (cumulative time and energy on simulated GPUs with a manual
// clock), retries with backoff, errors, and the end-of-run PATCH.
#include "zeus/bso/client.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/expect_error.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace {

using nlohmann::json;
using zeus::ErrorKind;
using zeus::bso::BatchSizeOptimizer;
using zeus::bso::BsoClient;
using zeus::bso::ClientOptions;
using zeus::bso::JobSpec;
using zeus::bso::ServerError;
using zeus::bso::ServerUrl;
using zeus::bso::TrainFailedError;
using zeus::bso::TrialId;
using zeus::testing::expect_error;

// ---- Simulated GPUs on a manual clock ----

struct Rig {
  std::shared_ptr<zeus::ManualClock> clock = std::make_shared<zeus::ManualClock>();
  std::vector<std::shared_ptr<zeus::device::SimulatedGpu>> gpus;
  zeus::device::Gpus set;
  std::shared_ptr<zeus::monitor::ZeusMonitor> monitor;

  explicit Rig(const std::vector<std::string>& models) {
    std::vector<std::shared_ptr<zeus::device::Gpu>> as_gpus;
    std::vector<int> physical;
    for (std::size_t i = 0; i < models.size(); ++i) {
      gpus.push_back(std::make_shared<zeus::device::SimulatedGpu>(
          zeus::device::simulated_gpu_model(models[i]), static_cast<int>(i), clock));
      as_gpus.push_back(gpus.back());
      physical.push_back(static_cast<int>(i));
    }
    set = zeus::device::Gpus(as_gpus, physical);
    zeus::monitor::ZeusMonitorOptions options;
    options.clock = clock;
    options.cpu_indices = std::vector<int>{};
    options.start_sampler_thread = false;
    monitor = std::make_shared<zeus::monitor::ZeusMonitor>(
        set, std::vector<std::shared_ptr<zeus::device::Cpu>>{}, options);
  }
  Rig(int count, const std::string& model) : Rig(std::vector<std::string>(count, model)) {}
};

// ---- The scripted peer ----

struct Recorded {
  std::string method;
  std::string path;
  std::string query_job_id;
  std::string body;
  std::string authorization;
};

struct Reply {
  Reply(int status_code = 200, std::string text = "null", std::string retry_after_s = "",
        double answer_delay_s = 0.0)
      : status(status_code),
        body(std::move(text)),
        retry_after(std::move(retry_after_s)),
        delay_s(answer_delay_s) {}
  int status;
  std::string body;
  std::string retry_after;
  double delay_s;  // answer late (timeouts)
};

// A port nothing listens on (bound, then closed).
int unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// Answers scripted replies per route ("POST /jobs"), falling back to a reasonable default, and
// records every request.
class Peer {
 public:
  explicit Peer(int port = 0) {
    const auto handle = [this](const httplib::Request& request, httplib::Response& response) {
      Reply reply = answer(request);
      if (reply.delay_s > 0.0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(reply.delay_s));
      }
      response.status = reply.status;
      response.set_content(reply.body, "application/json");
      if (!reply.retry_after.empty()) {
        response.set_header("Retry-After", reply.retry_after);
      }
    };
    server_.Get(".*", handle);
    server_.Post(".*", handle);
    server_.Patch(".*", handle);
    server_.Delete(".*", handle);
    if (port == 0) {
      port_ = server_.bind_to_any_port("127.0.0.1");
    } else {
      port_ = server_.bind_to_port("127.0.0.1", port) ? port : -1;
    }
    if (port_ <= 0) {
      throw std::runtime_error("the scripted peer could not bind");
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() is a no-op until the accept loop runs.
    while (!server_.is_running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~Peer() { stop(); }

  void stop() {
    server_.stop();
    if (thread_.joinable()) {
      thread_.join();
    }
  }

  std::string url(const std::string& prefix = "") const {
    return "http://127.0.0.1:" + std::to_string(port_) + prefix;
  }
  int port() const { return port_; }

  // Replies for one route, used in order; the last one stays.
  void script(const std::string& route, std::vector<Reply> replies) {
    const std::lock_guard lock(mutex_);
    scripts_[route] = std::deque<Reply>(replies.begin(), replies.end());
  }

  std::vector<Recorded> requests() const {
    const std::lock_guard lock(mutex_);
    return requests_;
  }
  std::vector<Recorded> requests(const std::string& method, const std::string& path_end) const {
    std::vector<Recorded> selected;
    for (const Recorded& request : requests()) {
      if (request.method == method && request.path.size() >= path_end.size() &&
          request.path.compare(request.path.size() - path_end.size(), path_end.size(), path_end) ==
              0) {
        selected.push_back(request);
      }
    }
    return selected;
  }

 private:
  Reply answer(const httplib::Request& request) {
    const std::lock_guard lock(mutex_);
    requests_.push_back({request.method, request.path,
                         request.has_param("job_id") ? request.get_param_value("job_id") : "",
                         request.body, request.get_header_value("Authorization")});
    // The route without a prefix: the last one or two path segments.
    std::string route = request.path;
    for (const char* known : {"/jobs/batch_size", "/jobs", "/report", "/trials"}) {
      const std::string suffix = known;
      if (route.size() >= suffix.size() &&
          route.compare(route.size() - suffix.size(), suffix.size(), suffix) == 0) {
        route = suffix;
        break;
      }
    }
    const std::string key = request.method + " " + route;
    if (auto found = scripts_.find(key); found != scripts_.end() && !found->second.empty()) {
      Reply reply = found->second.front();
      if (found->second.size() > 1) {
        found->second.pop_front();
      }
      return reply;
    }
    if (key == "POST /jobs") {
      json spec = json::parse(request.body);
      if (spec["job_id"].is_null()) {
        spec["job_id"] = spec["job_id_prefix"].get<std::string>() + "-0123abcd";
      }
      return {201, spec.dump()};
    }
    if (key == "GET /jobs/batch_size") {
      return {200, json{{"job_id", request.get_param_value("job_id")},
                        {"batch_size", 64},
                        {"trial_number", 1}}
                       .dump()};
    }
    if (key == "POST /report") {
      return {200, R"({"stop_train": false, "converged": false, "message": "keep training"})"};
    }
    return {200, "null"};
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::map<std::string, std::deque<Reply>> scripts_;
  std::vector<Recorded> requests_;
};

JobSpec sample_job() {
  JobSpec spec;
  spec.job_id = "mnist-job";
  spec.job_id_prefix = "mnist";
  spec.batch_sizes = {256, 32, 64, 128};  // unsorted: the client sorts them
  spec.default_batch_size = 128;
  spec.eta_knob = 0.25;
  spec.beta_knob = 3.0;
  spec.target_metric = 0.9;
  spec.max_epochs = 30;
  spec.mab_seed = 123456;
  return spec;
}

// A clock whose sleeps return at once (a ManualClock advances by them) and are recorded in
// seconds; `on_sleep` runs after each (a test starts a server during a pause).
class RecordingClock final : public zeus::Clock {
 public:
  std::int64_t now_ns() const override { return time.now_ns(); }
  void sleep_for_ns(std::int64_t duration_ns) const override {
    time.sleep_for_ns(duration_ns);
    delays->push_back(static_cast<double>(duration_ns) / 1e9);
    if (on_sleep) {
      on_sleep();
    }
  }
  zeus::ManualClock time;
  std::shared_ptr<std::vector<double>> delays = std::make_shared<std::vector<double>>();
  std::function<void()> on_sleep;
};

// Fast retries whose pauses are recorded instead of slept.
struct FastRetries {
  std::shared_ptr<RecordingClock> clock = std::make_shared<RecordingClock>();
  std::shared_ptr<std::vector<double>> delays = clock->delays;
  ClientOptions options(int attempts = 4) const {
    ClientOptions result;
    result.retry.max_attempts = attempts;
    result.retry.initial_delay_s = 0.1;
    result.retry.max_delay_s = 0.3;
    result.timeout_s = 2.0;
    result.env = [](const std::string&) { return std::nullopt; };
    result.clock = clock;
    return result;
  }
};

// ---- Registration ----

TEST(BsoClient, RegistersTheFullSpecWithTheGpuConfiguration) {
  Peer peer;
  Rig rig(2, "h200");
  FastRetries retries;
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), retries.options());

  const auto posts = peer.requests("POST", "/jobs");
  ASSERT_EQ(posts.size(), 1u);
  EXPECT_EQ(posts[0].path, "/jobs");
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(posts[0].body);
  std::vector<std::string> keys;
  for (const auto& item : body.items()) {
    keys.push_back(item.key());
  }
  const std::vector<std::string> expected_keys = {"max_power",
                                                  "number_of_gpus",
                                                  "gpu_model",
                                                  "job_id",
                                                  "job_id_prefix",
                                                  "batch_sizes",
                                                  "default_batch_size",
                                                  "eta_knob",
                                                  "beta_knob",
                                                  "target_metric",
                                                  "higher_is_better_metric",
                                                  "max_epochs",
                                                  "num_pruning_rounds",
                                                  "window_size",
                                                  "mab_prior_mean",
                                                  "mab_prior_precision",
                                                  "mab_num_explorations",
                                                  "mab_seed"};
  EXPECT_EQ(keys, expected_keys);
  EXPECT_EQ(body["max_power"], 1400.0);  // 700 W x 2 GPUs
  EXPECT_TRUE(body["max_power"].is_number_float());
  EXPECT_EQ(body["number_of_gpus"], 2);
  EXPECT_EQ(body["gpu_model"], "NVIDIA H200");
  EXPECT_EQ(body["job_id"], "mnist-job");
  EXPECT_EQ(body["job_id_prefix"], "mnist");
  EXPECT_EQ(body["batch_sizes"], json({32, 64, 128, 256}));
  EXPECT_EQ(body["default_batch_size"], 128);
  EXPECT_EQ(body["eta_knob"], 0.25);
  EXPECT_EQ(body["beta_knob"], 3.0);
  EXPECT_EQ(body["target_metric"], 0.9);
  EXPECT_EQ(body["higher_is_better_metric"], true);
  EXPECT_EQ(body["max_epochs"], 30);
  EXPECT_EQ(body["num_pruning_rounds"], 2);
  EXPECT_EQ(body["window_size"], 0);
  EXPECT_EQ(body["mab_prior_mean"], 0.0);
  EXPECT_EQ(body["mab_prior_precision"], 0.0);
  EXPECT_EQ(body["mab_num_explorations"], 2);
  EXPECT_EQ(body["mab_seed"], 123456);
  EXPECT_TRUE(posts[0].authorization.empty());

  EXPECT_TRUE(bso.job_created());
  EXPECT_EQ(bso.job().job_id, "mnist-job");
  EXPECT_EQ(bso.job().batch_sizes, std::vector<int>({32, 64, 128, 256}));
  EXPECT_TRUE(retries.delays->empty());
}

TEST(BsoClient, UnsetJobIdAndBetaAreSentAsNullAndTheServersIdIsKept) {
  Peer peer;
  Rig rig(1, "v100");
  JobSpec spec = sample_job();
  spec.job_id.reset();
  spec.beta_knob.reset();
  spec.mab_seed.reset();
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), spec, FastRetries().options());
  const json body = json::parse(peer.requests("POST", "/jobs").at(0).body);
  EXPECT_TRUE(body["job_id"].is_null());
  EXPECT_TRUE(body["beta_knob"].is_null());
  EXPECT_TRUE(body["mab_seed"].is_null());
  EXPECT_EQ(body["max_power"], 250.0);
  EXPECT_EQ(body["gpu_model"], "Tesla V100-PCIE-32GB");
  EXPECT_EQ(bso.job().job_id, "mnist-0123abcd");
}

TEST(BsoClient, ThePolicyIsSentOnlyWhenSet) {
  Peer peer;
  Rig rig(1, "v100");
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
  }
  EXPECT_FALSE(json::parse(peer.requests("POST", "/jobs").at(0).body).contains("policy"));
  JobSpec spec = sample_job();
  spec.policy = "low-regret";
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), spec, FastRetries().options());
  const json body = json::parse(peer.requests("POST", "/jobs").at(1).body);
  EXPECT_EQ(body.at("policy"), "low-regret");
}

TEST(BsoClient, ReRegistrationAnswered200IsNotACreation) {
  Peer peer;
  Rig rig(1, "a100");
  nlohmann::ordered_json stored = zeus::bso::to_json([] {
    JobSpec spec = sample_job();
    spec.batch_sizes = {32, 64, 128, 256};
    spec.max_power_w = 400.0;
    spec.number_of_gpus = 1;
    spec.gpu_model = "NVIDIA A100-SXM4-40GB";
    return spec;
  }());
  peer.script("POST /jobs", {{200, stored.dump()}});
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
  EXPECT_FALSE(bso.job_created());
}

TEST(BsoClient, RefusesGpusOfDifferentModelsAndNoGpu) {
  Peer peer;
  Rig mixed({"v100", "a100"});
  expect_error(
      [&] {
        BatchSizeOptimizer bso(mixed.monitor, mixed.set, peer.url(), sample_job(),
                               FastRetries().options());
      },
      ErrorKind::kInvalidArgument, {"one model", "Tesla V100", "NVIDIA A100"});

  Rig none(0, "v100");
  expect_error(
      [&] {
        BatchSizeOptimizer bso(none.monitor, none.set, peer.url(), sample_job(),
                               FastRetries().options());
      },
      ErrorKind::kInvalidArgument, {"at least one GPU"});
  EXPECT_TRUE(peer.requests().empty());
}

TEST(BsoClient, AnInvalidSpecIsRefusedBeforeAnyRequest) {
  Peer peer;
  Rig rig(1, "v100");
  JobSpec spec = sample_job();
  spec.default_batch_size = 100;
  spec.eta_knob = 1.5;
  expect_error(
      [&] {
        BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), spec, FastRetries().options());
      },
      ErrorKind::kInvalidArgument, {"invalid batch size optimizer job", "eta_knob"});
  EXPECT_TRUE(peer.requests().empty());
}

// ---- One training run ----

TEST(BsoClient, ReportsCumulativeTimeAndEnergyAndEndsTheTrial) {
  Peer peer;
  Rig rig(2, "a100");
  peer.script("POST /report",
              {{200, R"({"stop_train": false, "converged": false, "message": "keep training"})"},
               {200, R"({"stop_train": true, "converged": true, "message": "Train succeeded"})"}});
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
    expect_error([&] { bso.on_train_begin(); }, ErrorKind::kInvalidArgument, {"get_batch_size"});
    EXPECT_EQ(bso.get_batch_size(), 64);
    EXPECT_EQ(bso.get_batch_size(), 64);  // cached: one request
    const auto gets = peer.requests("GET", "/jobs/batch_size");
    ASSERT_EQ(gets.size(), 1u);
    EXPECT_EQ(gets[0].query_job_id, "mnist-job");
    expect_error([&] { bso.on_evaluate(0.1); }, ErrorKind::kInvalidArgument, {"on_train_begin"});

    bso.on_train_begin();
    rig.gpus[0]->set_utilization(1.0);  // 400 W
    rig.gpus[1]->set_utilization(1.0);
    rig.clock->advance_s(10.0);
    const auto first = bso.on_evaluate(0.5);
    EXPECT_FALSE(first.stop_train);
    EXPECT_FALSE(bso.training_finished());
    rig.gpus[1]->set_utilization(0.5);  // 227.5 W
    rig.clock->advance_s(5.0);
    const auto second = bso.on_evaluate(0.95);
    EXPECT_TRUE(second.stop_train);
    EXPECT_TRUE(second.converged);
    EXPECT_TRUE(bso.training_finished());
    EXPECT_EQ(bso.current_epoch(), 2);
    EXPECT_NEAR(bso.time_s(), 15.0, 1e-9);
    EXPECT_NEAR(bso.energy_j(), 800.0 * 10.0 + (400.0 + 227.5) * 5.0, 1.0);
    // After the end, on_evaluate is a no-op returning the last answer.
    EXPECT_EQ(bso.on_evaluate(0.99).message, "Train succeeded");
    EXPECT_TRUE(rig.monitor->open_windows().empty());
    EXPECT_TRUE(peer.requests("PATCH", "/trials").empty());
  }
  const auto reports = peer.requests("POST", "/report");
  ASSERT_EQ(reports.size(), 2u);
  const json r1 = json::parse(reports[0].body);
  EXPECT_EQ(r1["job_id"], "mnist-job");
  EXPECT_EQ(r1["batch_size"], 64);
  EXPECT_EQ(r1["trial_number"], 1);
  EXPECT_NEAR(r1["time"].get<double>(), 10.0, 1e-9);
  EXPECT_NEAR(r1["energy"].get<double>(), 8000.0, 1.0);
  EXPECT_EQ(r1["metric"], 0.5);
  EXPECT_EQ(r1["current_epoch"], 1);
  const json r2 = json::parse(reports[1].body);
  EXPECT_NEAR(r2["time"].get<double>(), 15.0, 1e-9);
  EXPECT_NEAR(r2["energy"].get<double>(), 8000.0 + 627.5 * 5.0, 1.0);
  EXPECT_EQ(r2["metric"], 0.95);
  EXPECT_EQ(r2["current_epoch"], 2);
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(reports[0].body);
  std::vector<std::string> keys;
  for (const auto& item : ordered.items()) {
    keys.push_back(item.key());
  }
  EXPECT_EQ(keys, std::vector<std::string>({"job_id", "batch_size", "trial_number", "time",
                                            "energy", "metric", "current_epoch"}));

  // Destruction ended the trial.
  const auto patches = peer.requests("PATCH", "/trials");
  ASSERT_EQ(patches.size(), 1u);
  EXPECT_EQ(json::parse(patches[0].body),
            json({{"job_id", "mnist-job"}, {"batch_size", 64}, {"trial_number", 1}}));
}

TEST(BsoClient, AStopWithoutConvergenceThrowsTrainFailed) {
  Peer peer;
  Rig rig(1, "h100");
  const std::string message =
      "Batch Size(64) exceeded the cost upper bound: current cost(91200.0) >\n"
      "                    beta_knob(2.0)*min_cost(44000.0)";
  peer.script(
      "POST /report",
      {{200, json{{"stop_train", true}, {"converged", false}, {"message", message}}.dump()}});
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
  bso.get_batch_size();
  bso.on_train_begin();
  rig.clock->advance_s(1.0);
  try {
    bso.on_evaluate(0.2);
    ADD_FAILURE() << "no TrainFailedError";
  } catch (const TrainFailedError& error) {
    EXPECT_NE(std::string(error.what()).find("Train failed: " + message), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("re-launch"), std::string::npos);
    EXPECT_FALSE(error.response().converged);
  }
  EXPECT_TRUE(bso.training_finished());
  EXPECT_NO_THROW(bso.on_evaluate(0.3));  // finished: nothing more is reported
  EXPECT_EQ(peer.requests("POST", "/report").size(), 1u);
  bso.end();
  bso.end();  // once only
  EXPECT_EQ(peer.requests("PATCH", "/trials").size(), 1u);
}

TEST(BsoClient, AFailedReportKeepsMeasuringAndTheNextOneCarriesTheTotals) {
  Peer peer;
  Rig rig(1, "a100");
  peer.script("POST /report",
              {{400, R"({"message": "bad report"})"},
               {200, R"({"stop_train": false, "converged": false, "message": "go"})"}});
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
  bso.get_batch_size();
  bso.on_train_begin();
  rig.gpus[0]->set_utilization(1.0);  // 400 W
  rig.clock->advance_s(4.0);
  expect_error([&] { bso.on_evaluate(0.1); }, ErrorKind::kInvalidArgument, {"bad report"});
  rig.clock->advance_s(6.0);
  bso.on_evaluate(0.2);
  const auto reports = peer.requests("POST", "/report");
  ASSERT_EQ(reports.size(), 2u);
  const json second = json::parse(reports[1].body);
  EXPECT_EQ(second["current_epoch"], 2);
  EXPECT_NEAR(second["time"].get<double>(), 10.0, 1e-9);
  EXPECT_NEAR(second["energy"].get<double>(), 4000.0, 1.0);
}

TEST(BsoClient, AnAbortedRunIsEndedAtDestructionWithItsWindowClosed) {
  Peer peer;
  Rig rig(1, "v100");
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
    bso.get_batch_size();
    bso.on_train_begin();
    rig.clock->advance_s(3.0);
    bso.on_evaluate(0.1);  // keep training; then the run "crashes"
    EXPECT_EQ(rig.monitor->open_windows().size(), 1u);
  }
  EXPECT_TRUE(rig.monitor->open_windows().empty());
  EXPECT_EQ(peer.requests("PATCH", "/trials").size(), 1u);
}

TEST(BsoClient, WithoutATrialNothingIsEnded) {
  Peer peer;
  Rig rig(1, "v100");
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
  }
  EXPECT_TRUE(peer.requests("PATCH", "/trials").empty());
}

TEST(BsoClient, OtherRanksUseTheTrialFromRankZeroAndDoNotEndIt) {
  Peer peer;
  Rig rig(1, "v100");
  ClientOptions options = FastRetries().options();
  options.rank = 1;
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), options);
    expect_error([&] { bso.get_batch_size(); }, ErrorKind::kInvalidArgument,
                 {"only rank 0", "rank 1", "set_trial"});
    expect_error(
        [&] {
          bso.set_trial(TrialId{"other-job", 64, 3});
        },
        ErrorKind::kInvalidArgument, {"not a trial of job mnist-job"});
    expect_error(
        [&] {
          bso.set_trial(TrialId{"mnist-job", 48, 3});
        },
        ErrorKind::kInvalidArgument, {"batch size 48"});
    bso.set_trial(TrialId{"mnist-job", 128, 3});
    EXPECT_EQ(bso.get_batch_size(), 128);
    expect_error(
        [&] {
          bso.set_trial(TrialId{"mnist-job", 64, 4});
        },
        ErrorKind::kInvalidArgument, {"already set"});
    bso.on_train_begin();
    rig.clock->advance_s(2.0);
    bso.on_evaluate(0.4);
  }
  EXPECT_TRUE(peer.requests("GET", "/jobs/batch_size").empty());
  const auto reports = peer.requests("POST", "/report");
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(json::parse(reports[0].body)["trial_number"], 3);
  EXPECT_TRUE(peer.requests("PATCH", "/trials").empty());
}

TEST(BsoClient, AStrangeBatchSizeIsAnError) {
  Peer peer;
  Rig rig(1, "v100");
  peer.script("GET /jobs/batch_size",
              {{200, R"({"job_id": "mnist-job", "batch_size": 48, "trial_number": 1})"}});
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
  expect_error([&] { bso.get_batch_size(); }, ErrorKind::kUnknown,
               {"GET /jobs/batch_size", "strange", "batch size 48", "32, 64, 128, 256"});
  EXPECT_FALSE(bso.trial().has_value());
}

// ---- Retries ----

TEST(BsoClient, RetriesUnavailableAnswersWithExponentialBackoff) {
  Peer peer;
  Rig rig(1, "v100");
  FastRetries retries;
  // Three unavailable answers, then the stored spec.
  JobSpec stored = sample_job();
  stored.batch_sizes = {32, 64, 128, 256};
  stored.max_power_w = 250.0;
  stored.number_of_gpus = 1;
  stored.gpu_model = "Tesla V100-PCIE-32GB";
  peer.script("POST /jobs", {{503, R"({"message": "database unavailable"})"},
                             {502, "bad gateway"},
                             {504, "gateway timeout"},
                             {201, zeus::bso::to_json(stored).dump()}});
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), retries.options(5));
  EXPECT_EQ(peer.requests("POST", "/jobs").size(), 4u);
  // 0.1, then doubled, capped at 0.3.
  EXPECT_EQ(*retries.delays, std::vector<double>({0.1, 0.2, 0.3}));
  EXPECT_TRUE(bso.job_created());
}

TEST(BsoClient, RetryAfterLengthensThePauseUpToTheCap) {
  Peer peer;
  FastRetries retries;
  peer.script("PATCH /trials", {{503, "{}", "0.25"}, {503, "{}", "60"}, {200, "null"}});
  BsoClient client(peer.url(), retries.options());
  client.end_trial(TrialId{"j", 1, 1});
  EXPECT_EQ(*retries.delays, std::vector<double>({0.25, 0.3}));
}

TEST(BsoClient, GivesUpAfterTheLastAttemptNamingTheRouteAndTheStatus) {
  Peer peer;
  FastRetries retries;
  peer.script("POST /report", {{503, R"({"message": "store is read-only"})"}});
  BsoClient client(peer.url(), retries.options(3));
  try {
    client.report({});
    ADD_FAILURE() << "no error";
  } catch (const ServerError& error) {
    EXPECT_EQ(error.status(), 503);
    EXPECT_EQ(error.route(), "POST /report");
    EXPECT_EQ(error.server_message(), "store is read-only");
    const std::string what = error.what();
    EXPECT_NE(what.find("POST /report"), std::string::npos) << what;
    EXPECT_NE(what.find("503"), std::string::npos) << what;
    EXPECT_NE(what.find("store is read-only"), std::string::npos) << what;
    EXPECT_NE(what.find("3 attempts"), std::string::npos) << what;
  }
  EXPECT_EQ(peer.requests().size(), 3u);
  EXPECT_EQ(retries.delays->size(), 2u);
}

TEST(BsoClient, RetriesARefusedConnectionUntilTheServerComesUp) {
  const int port = unused_port();
  std::unique_ptr<Peer> late;
  FastRetries retries;
  ClientOptions options = retries.options(5);
  int pauses = 0;
  retries.clock->on_sleep = [&] {
    if (++pauses == 2) {
      late = std::make_unique<Peer>(port);  // the server starts during the second pause
    }
  };
  BsoClient client("http://127.0.0.1:" + std::to_string(port), options);
  const TrialId trial = client.next_batch_size("job-1");
  EXPECT_EQ(trial.batch_size, 64);
  EXPECT_EQ(*retries.delays, std::vector<double>({0.1, 0.2}));
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->requests().size(), 1u);
}

TEST(BsoClient, ARefusedConnectionFailsWithKindIoAfterTheLastAttempt) {
  FastRetries retries;
  BsoClient client("http://127.0.0.1:" + std::to_string(unused_port()), retries.options(3));
  expect_error([&] { client.next_batch_size("job-1"); }, ErrorKind::kIo,
               {"GET /jobs/batch_size", "cannot connect", "gave up after 3 attempts"});
  EXPECT_EQ(*retries.delays, std::vector<double>({0.1, 0.2}));
  // The pauses are sleeps on the injected clock, not wall time.
  EXPECT_EQ(retries.clock->time.slept_ns(), 300'000'000);
  EXPECT_EQ(retries.clock->time.sleeps(), 2);
}

TEST(BsoClient, ATimeoutIsRetriedThenReported) {
  Peer peer;
  FastRetries retries;
  ClientOptions options = retries.options(2);
  options.timeout_s = 0.2;
  peer.script("GET /jobs/batch_size", {{200, "{}", "", 0.6}});
  BsoClient client(peer.url(), options);
  expect_error([&] { client.next_batch_size("job-1"); }, ErrorKind::kTimeout,
               {"GET /jobs/batch_size", "0.2 s", "gave up after 2 attempts"});
  EXPECT_EQ(retries.delays->size(), 1u);
}

TEST(BsoClient, ClientErrorsAreNotRetried) {
  Peer peer;
  FastRetries retries;
  BsoClient client(peer.url(), retries.options());

  peer.script("POST /report", {{400, R"({"message": "Unknown trial job_id='x'"})"}});
  try {
    client.report({});
    ADD_FAILURE() << "no error";
  } catch (const ServerError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(error.status(), 400);
    const std::string what = error.what();
    EXPECT_NE(what.find("POST /report"), std::string::npos) << what;
    EXPECT_NE(what.find("answered 400: Unknown trial job_id='x'"), std::string::npos) << what;
  }
  EXPECT_EQ(peer.requests().size(), 1u);

  peer.script("PATCH /trials",
              {{404, R"({"message": "Could not find the trial: job_id='x' batch_size=1"})"}});
  expect_error(
      [&] {
        client.end_trial({"x", 1, 1});
      },
      ErrorKind::kNotFound, {"PATCH /trials", "404", "Could not find the trial"});

  peer.script("POST /jobs", {{409, R"({"message": "JobSpec doesn't match"})"}});
  expect_error([&] { client.register_job(sample_job()); }, ErrorKind::kInvalidArgument,
               {"POST /jobs", "409", "JobSpec doesn't match"});

  peer.script("POST /jobs",
              {{422, R"({"detail": [{"loc": ["body", "max_power"], "msg": "ensure this value )"
                     R"(is greater than 0", "type": "value_error.number.not_gt"}]})"}});
  expect_error([&] { client.register_job(sample_job()); }, ErrorKind::kInvalidArgument,
               {"422", "body.max_power: \"ensure this value is greater than 0\""});

  peer.script("GET /jobs/batch_size", {{401, R"({"detail": "missing bearer token"})"}});
  expect_error([&] { client.next_batch_size("x"); }, ErrorKind::kNoPermission,
               {"401", "missing bearer token"});

  peer.script("GET /jobs/batch_size", {{500, R"({"message": "No converged batch sizes has )"
                                             R"(observed."})"}});
  expect_error([&] { client.next_batch_size("x"); }, ErrorKind::kUnknown,
               {"500", "No converged batch sizes"});
  EXPECT_TRUE(retries.delays->empty());
}

TEST(BsoClient, AMalformedSuccessBodyIsAClearError) {
  Peer peer;
  BsoClient client(peer.url(), FastRetries().options());
  peer.script("GET /jobs/batch_size", {{200, "<html>proxy</html>"}});
  expect_error([&] { client.next_batch_size("x"); }, ErrorKind::kUnknown,
               {"GET /jobs/batch_size", "answered 200 with a malformed body", "<html>proxy"});
  peer.script("POST /report", {{200, R"({"stop_train": "maybe"})"}});
  expect_error([&] { client.report({}); }, ErrorKind::kUnknown, {"POST /report", "malformed body"});
  peer.script("POST /jobs", {{201, R"({"job_id": "x"})"}});
  expect_error([&] { client.register_job(sample_job()); }, ErrorKind::kUnknown,
               {"POST /jobs", "malformed"});
}

TEST(BsoClient, DeleteJobTellsWhetherThereWasOne) {
  Peer peer;
  BsoClient client(peer.url(), FastRetries().options());
  EXPECT_TRUE(client.delete_job("a b/c"));
  EXPECT_EQ(peer.requests().at(0).query_job_id, "a b/c");
  peer.script("DELETE /jobs", {{404, R"({"message": "No job was deleted."})"}});
  EXPECT_FALSE(client.delete_job("gone"));
}

// ---- URL, token ----

TEST(BsoClient, APrefixAndATrailingSlashAreHandled) {
  Peer peer;
  Rig rig(1, "v100");
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url("/zeus/bso/"), sample_job(),
                           FastRetries().options());
    bso.get_batch_size();
  }
  const auto requests = peer.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].path, "/zeus/bso/jobs");
  EXPECT_EQ(requests[1].path, "/zeus/bso/jobs/batch_size");
  EXPECT_EQ(requests[2].path, "/zeus/bso/trials");
}

TEST(BsoClient, SendsTheBearerTokenFromOptionsOrEnvironment) {
  Peer peer;
  ClientOptions options = FastRetries().options();
  options.token = "s3cret";
  BsoClient(peer.url(), options).end_trial({"j", 1, 1});
  options.token.reset();
  options.env = [](const std::string& name) -> std::optional<std::string> {
    return name == "ZEUS_BSO_TOKEN" ? std::optional<std::string>("from-env") : std::nullopt;
  };
  BsoClient(peer.url(), options).end_trial({"j", 1, 1});
  options.env = [](const std::string&) -> std::optional<std::string> { return ""; };
  BsoClient(peer.url(), options).end_trial({"j", 1, 1});
  const auto requests = peer.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].authorization, "Bearer s3cret");
  EXPECT_EQ(requests[1].authorization, "Bearer from-env");
  EXPECT_EQ(requests[2].authorization, "");
}

TEST(ServerUrl, ParsesHostPortAndPrefix) {
  ServerUrl url = ServerUrl::parse("http://bso.example:8000/");
  EXPECT_EQ(url.host, "bso.example");
  EXPECT_EQ(url.port, 8000);
  EXPECT_EQ(url.prefix, "");
  url = ServerUrl::parse("HTTP://10.0.0.2/a/b//");
  EXPECT_EQ(url.host, "10.0.0.2");
  EXPECT_EQ(url.port, 80);
  EXPECT_EQ(url.prefix, "/a/b");
  EXPECT_EQ(url.to_string(), "http://10.0.0.2:80/a/b");
  url = ServerUrl::parse("[::1]:9000");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, 9000);
  EXPECT_EQ(url.to_string(), "http://[::1]:9000");

  url = ServerUrl::parse("https://bso.example/");
  EXPECT_EQ(url.scheme, "https");
  EXPECT_EQ(url.port, 443);
  EXPECT_EQ(url.to_string(), "https://bso.example:443");

  for (const char* bad : {"ftp://h", "http://:80", "http://h:0", "http://h:99999", "http://h:8x",
                          "http://u@h:1", "http://h:1/p?q=1", "http://[::1", "http://::1:80"}) {
    expect_error([&] { ServerUrl::parse(bad); }, ErrorKind::kInvalidArgument,
                 {std::string("\"") + bad + "\""});
  }
}

#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
// https with a self-signed certificate made by the openssl command (skipped without it).
TEST(BsoClient, TalksHttpsAndVerifiesTheCertificate) {
  const std::string dir = ::testing::TempDir() + "bso-tls-" + std::to_string(::getpid());
  const std::string command = "mkdir -p " + dir +
                              " && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "
                              "/CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " +
                              dir + "/key.pem -out " + dir + "/cert.pem >/dev/null 2>&1";
  if (std::system(command.c_str()) != 0) {
    GTEST_SKIP() << "no openssl command to make a certificate";
  }
  httplib::SSLServer server((dir + "/cert.pem").c_str(), (dir + "/key.pem").c_str());
  ASSERT_TRUE(server.is_valid());
  server.Get(".*", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(R"({"job_id": "j", "batch_size": 32, "trial_number": 7})",
                         "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread thread([&] { server.listen_after_bind(); });
  while (!server.is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  ClientOptions options = FastRetries().options();
  options.ca_cert_path = dir + "/cert.pem";
  const std::string url = "https://127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(BsoClient(url, options).next_batch_size("j").trial_number, 7);
  options.ca_cert_path.clear();  // the system store does not know this certificate
  expect_error([&] { BsoClient(url, options).next_batch_size("j"); }, ErrorKind::kIo,
               {"GET /jobs/batch_size", "ca_cert_path"});

  server.stop();
  thread.join();
  std::filesystem::remove_all(dir);
}
#endif

TEST(BsoClient, RejectsBadOptions) {
  ClientOptions options;
  options.timeout_s = 0.0;
  expect_error([&] { BsoClient("http://h:1", options); }, ErrorKind::kInvalidArgument,
               {"timeout_s"});
  options = {};
  options.retry.max_attempts = 0;
  expect_error([&] { BsoClient("http://h:1", options); }, ErrorKind::kInvalidArgument,
               {"max_attempts"});
  options = {};
  options.rank = -1;
  expect_error([&] { BsoClient("http://h:1", options); }, ErrorKind::kInvalidArgument, {"rank"});
}

TEST(BsoClient, TheDestructorNeverThrowsWhenTheServerIsGone) {
  auto peer = std::make_unique<Peer>();
  Rig rig(1, "v100");
  FastRetries retries;
  auto bso = std::make_unique<BatchSizeOptimizer>(rig.monitor, rig.set, peer->url(), sample_job(),
                                                  retries.options(2));
  bso->get_batch_size();
  bso->on_train_begin();
  peer.reset();
  EXPECT_NO_THROW(bso.reset());
  EXPECT_EQ(retries.delays->size(), 1u);  // PATCH was tried twice
  EXPECT_TRUE(rig.monitor->open_windows().empty());
}

}  // namespace
