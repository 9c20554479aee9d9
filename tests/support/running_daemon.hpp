// A zeusd Daemon serving on a temporary Unix socket over simulated H200s and fake RAPL CPUs, and
// one-request helpers: the in-process daemon of every suite that needs one (tests/daemon, and the
// device layer's zeusd clients in tests/device).
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "daemon/command_overrides.hpp"
#include "daemon/daemon.hpp"
#include "support/temp_dir.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace zeus::daemon {

namespace fs = std::filesystem;
using TempDir = zeus::testing::TempDir;

inline device::Gpus simulated_gpus(int count) {
  std::vector<std::shared_ptr<device::Gpu>> gpus;
  std::vector<int> indices;
  for (int i = 0; i < count; ++i) {
    gpus.push_back(std::make_shared<device::SimulatedGpu>(device::simulated_gpu_model("h200"), i,
                                                          steady_clock()));
    indices.push_back(i);
  }
  return device::Gpus(gpus, indices);
}

class FakeCpu final : public device::Cpu {
 public:
  FakeCpu(int index, bool dram) : index_(index), dram_(dram) {}
  int index() const override { return index_; }
  std::string name() const override { return "package-" + std::to_string(index_); }
  std::uint64_t package_energy_uj() override { return energy_uj_ += 10000; }
  bool has_dram() const override { return dram_; }
  std::uint64_t dram_energy_uj() override {
    if (!dram_) {
      throw Error(ErrorKind::kNotSupported, "no DRAM zone");
    }
    return dram_energy_uj_ += 1000;
  }

 private:
  int index_;
  bool dram_;
  std::uint64_t energy_uj_ = 1000000;
  std::uint64_t dram_energy_uj_ = 5000;
};

// A daemon serving on <tmp>/zeusd.sock in a background thread.
class Running {
 public:
  // `overrides`: the daemon's GPUs run these commands (gpu(i) stays the simulated GPU).
  // `cpus`: the daemon's CPUs; by default two FakeCpus, package 0 with DRAM and 1 without.
  explicit Running(DaemonConfig config, int gpu_count = 2, DaemonHooks hooks = {},
                   std::shared_ptr<const CommandOverrides> overrides = nullptr,
                   std::optional<std::vector<std::shared_ptr<device::Cpu>>> cpus = std::nullopt)
      : Running(simulated_gpus(gpu_count), std::move(config), std::move(hooks),
                std::move(overrides), std::move(cpus)) {}
  // Over `gpus` (e.g. decorated simulated GPUs that count their calls).
  Running(device::Gpus gpus, DaemonConfig config, DaemonHooks hooks = {},
          std::shared_ptr<const CommandOverrides> overrides = nullptr,
          std::optional<std::vector<std::shared_ptr<device::Cpu>>> cpus = std::nullopt)
      : gpus_(std::move(gpus)) {
    if (config.mode == TransportMode::kUds) {
      config.socket_path = dir_.path() / "zeusd.sock";
    }
    if (!cpus) {
      cpus = {std::make_shared<FakeCpu>(0, true), std::make_shared<FakeCpu>(1, false)};
    }
    daemon_ = std::make_unique<Daemon>(config,
                                       overrides ? with_command_overrides(gpus_, overrides) : gpus_,
                                       std::move(*cpus), std::move(hooks));
    daemon_->bind();
    thread_ = std::thread([this] { daemon_->serve(); });
    for (int i = 0; i < 500 && !daemon_->is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  ~Running() {
    daemon_->stop();
    thread_.join();
  }
  httplib::Client client() const {
    httplib::Client cli(daemon_->config().socket_path.string(), 80);
    cli.set_address_family(AF_UNIX);
    cli.set_read_timeout(5, 0);
    return cli;
  }
  device::Gpu& gpu(int i) { return gpus_.at(i); }
  Daemon& daemon() { return *daemon_; }
  const fs::path& dir() const { return dir_.path(); }
  std::string socket() const { return daemon_->config().socket_path.string(); }

 private:
  TempDir dir_;
  device::Gpus gpus_;
  std::unique_ptr<Daemon> daemon_;
  std::thread thread_;
};

struct Reply {
  int status = 0;
  std::string body;
  std::string content_type;
  std::string www_authenticate;
};

inline Reply get(const Running& d, const std::string& target) {
  auto cli = d.client();
  auto res = cli.Get(target.c_str());
  if (!res) {
    throw std::runtime_error("GET " + target + " failed: " + httplib::to_string(res.error()));
  }
  return {res->status, res->body, res->get_header_value("Content-Type"),
          res->get_header_value("WWW-Authenticate")};
}

inline Reply post(const Running& d, const std::string& target) {
  auto cli = d.client();
  auto res = cli.Post(target.c_str());
  if (!res) {
    throw std::runtime_error("POST " + target + " failed: " + httplib::to_string(res.error()));
  }
  return {res->status, res->body, res->get_header_value("Content-Type"),
          res->get_header_value("WWW-Authenticate")};
}

}  // namespace zeus::daemon
