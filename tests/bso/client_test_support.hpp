// The batch-size-optimizer client tests' rig (client_test.cpp, client_retry_test.cpp): simulated
// GPUs on a manual clock, a scripted HTTP peer on a loopback port that records every request, and
// a clock that records the client's pauses.
#pragma once

#include "zeus/runtime/batch_size_optimizer.hpp"

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

#include "zeus/common/clock.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace zeus::testing::bso_client {

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
inline int unused_port() {
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

inline JobSpec sample_job() {
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

}  // namespace zeus::testing::bso_client
