// A real batch-size-optimizer server for tests: a store (SQLite in a temporary directory unless
// a URL is given), the service and the HTTP server on a free loopback port, served by a thread.
#pragma once

#include <httplib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

#include "server/http_server.hpp"
#include "server/service.hpp"
#include "server/store.hpp"

namespace zeus::test {

inline std::filesystem::path make_temp_dir(const std::string& stem) {
  std::random_device random;
  const auto dir = std::filesystem::temp_directory_path() /
                   (stem + "-" + std::to_string(random()) + std::to_string(random()));
  std::filesystem::create_directories(dir);
  return dir;
}

class ServerHarness {
 public:
  // `default_policy`: the policy of jobs whose spec names none (`zeus bso serve --policy`).
  explicit ServerHarness(std::string db_url = {}, server::HttpServerOptions options = {},
                         std::string default_policy = "zeus") {
    if (db_url.empty()) {
      dir_ = make_temp_dir("zeus-bso-test");
      db_url = "sqlite:///" + (dir_ / "bso.db").string();
    }
    url_ = db_url;
    store_ = server::open_store(db_url);
    service_ = std::make_unique<server::BsoService>(*store_, nullptr, std::move(default_policy));
    options.port = 0;
    http_ = std::make_unique<server::HttpServer>(*service_, options);
    port_ = http_->bind();
    thread_ = std::thread([this] { http_->serve(); });
  }
  ~ServerHarness() {
    stop();
    http_.reset();
    service_.reset();
    store_.reset();
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  void stop() {
    if (thread_.joinable()) {
      while (!http_->running() && thread_.joinable()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      http_->stop();
      thread_.join();
    }
  }

  int port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  server::Store& store() { return *store_; }
  server::BsoService& service() { return *service_; }
  const std::string& db_url() const { return url_; }
  const std::filesystem::path& dir() const { return dir_; }

  // A new connection per call, as the reference's client does.
  httplib::Result request(const std::string& method, const std::string& path,
                          const std::string& body = {}) const {
    httplib::Client client("127.0.0.1", port_);
    client.set_keep_alive(false);
    client.set_read_timeout(10, 0);
    if (method == "GET") {
      return client.Get(path.c_str());
    }
    if (method == "POST") {
      return client.Post(path.c_str(), body, "");
    }
    if (method == "PATCH") {
      return client.Patch(path.c_str(), body, "");
    }
    if (method == "DELETE") {
      return client.Delete(path.c_str());
    }
    return client.Put(path.c_str(), body, "");
  }

 private:
  std::filesystem::path dir_;
  std::string url_;
  std::unique_ptr<server::Store> store_;
  std::unique_ptr<server::BsoService> service_;
  std::unique_ptr<server::HttpServer> http_;
  std::thread thread_;
  int port_ = 0;
};

// The peer scenario's synthetic workload (wire-protocol doc §5): seconds per epoch, watts per
// GPU, and the epoch at which the metric reaches the target 0.9 (0 = never).
struct PeerWorkload {
  double epoch_s;
  double power_w;
  int epochs_to_target;
};
inline const std::map<int, PeerWorkload>& peer_workload() {
  static const std::map<int, PeerWorkload> table = {
      {16, {40, 200, 50}}, {32, {24, 250, 30}},  {64, {14, 300, 8}},    {128, {8, 400, 10}},
      {256, {5, 550, 16}}, {512, {3.5, 650, 0}}, {1024, {2.5, 690, 0}},
  };
  return table;
}

// The reference client's registration body for the wire-protocol doc's peer scenario.
inline nlohmann::ordered_json peer_job_spec(const std::string& job_id = "peer-scenario") {
  nlohmann::ordered_json spec;
  spec["max_power"] = 700.0;
  spec["number_of_gpus"] = 1;
  spec["gpu_model"] = "NVIDIA H200";
  spec["job_id"] = job_id;
  spec["job_id_prefix"] = "peer";
  spec["batch_sizes"] = {16, 32, 64, 128, 256, 512, 1024};
  spec["default_batch_size"] = 128;
  spec["eta_knob"] = 0.5;
  spec["beta_knob"] = 2.0;
  spec["target_metric"] = 0.9;
  spec["higher_is_better_metric"] = true;
  spec["max_epochs"] = 30;
  spec["num_pruning_rounds"] = 2;
  spec["window_size"] = 0;
  spec["mab_prior_mean"] = 0.0;
  spec["mab_prior_precision"] = 0.0;
  spec["mab_num_explorations"] = 2;
  spec["mab_seed"] = 123456;
  return spec;
}

}  // namespace zeus::test
