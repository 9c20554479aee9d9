#include "daemon/gpu_writer.hpp"

#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "common/log.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon {

// A thread that runs its tasks one at a time, in the order they were queued.
class GpuWriters::Worker {
 public:
  Worker() : thread_([this] { run(); }) {}
  ~Worker() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void enqueue(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_all();
  }

 private:
  void run() {
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) {
          return;  // stopping, queue drained
        }
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

SettingValue current_value(device::Gpu& gpu, Setting setting) {
  switch (setting) {
    case Setting::kPowerLimit:
      return SettingValue::power_limit(gpu.power_limit_mw());
    case Setting::kPersistenceMode:
      return SettingValue::persistence(gpu.persistence_mode());
    case Setting::kGpuLockedClocks:
    case Setting::kMemoryLockedClocks:
      break;
  }
  return SettingValue::locked_clocks(std::nullopt);
}

GpuWriters::GpuWriters(device::Gpus& gpus, WriteHook before_write, WriteHook on_write)
    : gpus_(gpus), before_write_(std::move(before_write)), on_write_(std::move(on_write)) {
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    workers_.push_back(std::make_unique<Worker>());
  }
}

GpuWriters::~GpuWriters() = default;

void GpuWriters::run_serialized(int gpu_index, const std::function<void()>& action) {
  if (gpu_index < 0 || static_cast<std::size_t>(gpu_index) >= workers_.size()) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("GPU index {} does not exist ({} GPUs)", gpu_index, workers_.size()));
  }
  std::promise<void> done;
  workers_[static_cast<std::size_t>(gpu_index)]->enqueue([&action, &done] {
    try {
      action();
      done.set_value();
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  });
  done.get_future().get();
}

std::future<std::optional<DeviceFailure>> GpuWriters::submit(int gpu_index, GpuWrite write,
                                                             PeerCredentials peer) {
  auto promise = std::make_shared<std::promise<std::optional<DeviceFailure>>>();
  auto result = promise->get_future();
  workers_.at(static_cast<std::size_t>(gpu_index))
      ->enqueue([this, gpu_index, write = std::move(write), peer, promise] {
        std::optional<DeviceFailure> failure;
        try {
          write_now(gpu_index, write, peer);
        } catch (const std::exception& e) {
          failure = failure_of(e);
          log().error("zeusd: GPU {} {} = {} failed ({}): {}", gpu_index, write.field,
                      write.value ? value_text(write.settings.front(), *write.value) : "reset",
                      peer_text(peer), failure->message);
        }
        promise->set_value(failure);
      });
  return result;
}

void GpuWriters::write_now(int gpu_index, const GpuWrite& write, const PeerCredentials& peer) {
  device::Gpu& gpu = gpus_.at(gpu_index);
  std::vector<WriteEvent> events;
  for (const Setting setting : write.settings) {
    WriteEvent event{gpu_index, setting, std::nullopt, write.value, peer};
    try {
      event.old_value = current_value(gpu, setting);
    } catch (const std::exception& e) {
      log().debug("zeusd: cannot read the old {} of GPU {}: {}", setting_field(setting), gpu_index,
                  e.what());
    }
    events.push_back(std::move(event));
  }
  if (before_write_) {
    for (const WriteEvent& event : events) {
      before_write_(event);
    }
  }
  if (write.value) {
    apply_setting(gpu, write.settings.front(), *write.value);
  } else {
    write.reset(gpu);
  }
  const WriteEvent& first = events.front();
  log().info("zeusd: GPU {} {}: {} -> {} ({})", gpu_index, write.field,
             first.old_value && !first.is_reset() ? value_text(first.setting, *first.old_value)
                                                  : "unknown",
             write.value ? value_text(first.setting, *write.value) : "reset", peer_text(peer));
  if (on_write_) {
    for (const WriteEvent& event : events) {
      on_write_(event);
    }
  }
}

}  // namespace zeus::daemon
