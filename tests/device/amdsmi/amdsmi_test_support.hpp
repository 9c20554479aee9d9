// The AMD SMI tests' fixture (amdsmi_test.cpp, amdsmi_counters_test.cpp): the fake
// libamd_smi.so loaded by the test to script it, scripts, and AmdSmiTest, which opens the backend
// on a fake clock.
#pragma once

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "amdsmi_api.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpu.hpp"
#include "zeus/device/gpu_provider.hpp"

namespace zeus::testing::amdsmi {

using zeus::ErrorKind;

inline std::string fake_path(const char* variable, const char* fallback) {
  const char* value = std::getenv(variable);
  return value != nullptr && value[0] != '\0' ? std::string(value) : std::string(fallback);
}

// The test's own handle on a fake library; the backend's dlopen of the same path shares it.
class FakeLibrary {
 public:
  explicit FakeLibrary(std::string path) : path_(std::move(path)) {
    handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      throw std::runtime_error("cannot load the fake AMD SMI: " + std::string(dlerror()));
    }
    configure_ = reinterpret_cast<int (*)(const char*)>(symbol("fake_amdsmi_configure"));
    reset_ = reinterpret_cast<void (*)()>(symbol("fake_amdsmi_reset"));
    set_status_ =
        reinterpret_cast<void (*)(const char*, std::uint32_t)>(symbol("fake_amdsmi_set_status"));
    advance_ = reinterpret_cast<void (*)(double)>(symbol("fake_amdsmi_advance_time_s"));
    state_ =
        reinterpret_cast<std::size_t (*)(char*, std::size_t)>(symbol("fake_amdsmi_state_json"));
  }
  ~FakeLibrary() { dlclose(handle_); }
  FakeLibrary(const FakeLibrary&) = delete;
  FakeLibrary& operator=(const FakeLibrary&) = delete;

  const std::string& path() const { return path_; }
  void configure(const nlohmann::json& script) {
    if (configure_(script.dump().c_str()) != 0) {
      throw std::runtime_error("bad fake script: " + state().at("last_error").get<std::string>());
    }
  }
  void reset() { reset_(); }
  void set_status(const char* function, std::uint32_t status) { set_status_(function, status); }
  void advance_time_s(double seconds) { advance_(seconds); }
  nlohmann::json state() {
    std::string text(state_(nullptr, 0) + 1, '\0');
    state_(text.data(), text.size());
    text.resize(text.size() - 1);
    return nlohmann::json::parse(text);
  }
  nlohmann::json device_state(int index) { return state().at("devices").at(index); }

 private:
  void* symbol(const char* name) {
    void* address = dlsym(handle_, name);
    if (address == nullptr) {
      throw std::runtime_error(std::string("the fake lacks ") + name);
    }
    return address;
  }

  std::string path_;
  void* handle_ = nullptr;
  int (*configure_)(const char*) = nullptr;
  void (*reset_)() = nullptr;
  void (*set_status_)(const char*, std::uint32_t) = nullptr;
  void (*advance_)(double) = nullptr;
  std::size_t (*state_)(char*, std::size_t) = nullptr;
};

inline FakeLibrary& full_fake() {
  static FakeLibrary fake(fake_path("ZEUS_FAKE_AMDSMI", ZEUS_FAKE_AMDSMI_DEFAULT));
  return fake;
}

inline FakeLibrary& minimal_fake() {
  static FakeLibrary fake(fake_path("ZEUS_FAKE_AMDSMI_MINIMAL", ZEUS_FAKE_AMDSMI_MINIMAL_DEFAULT));
  return fake;
}

inline std::string broken_fake_path() {
  return fake_path("ZEUS_FAKE_AMDSMI_BROKEN", ZEUS_FAKE_AMDSMI_BROKEN_DEFAULT);
}

inline zeus::EnvLookup env_of(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const std::string& name) -> std::optional<std::string> {
    const auto it = values.find(name);
    if (it == values.end()) {
      return std::nullopt;
    }
    return it->second;
  };
}

inline nlohmann::json device(const std::string& name,
                             nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json result = {{"name", name}};
  result.update(extra);
  return result;
}

inline nlohmann::json script_of(std::vector<nlohmann::json> devices,
                                nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json result = {{"devices", devices}};
  result.update(extra);
  return result;
}

// A script fragment making `function` fail with `status`.
inline nlohmann::json status_override(const std::string& function, std::uint32_t status) {
  nlohmann::json overrides = nlohmann::json::object();
  overrides[function] = status;
  nlohmann::json result = nlohmann::json::object();
  result["status"] = overrides;
  return result;
}

// Expects `statement` to throw zeus::Error of `kind`; returns its message.
template <typename Statement>
std::string expect_error(Statement&& statement, ErrorKind kind) {
  try {
    statement();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), kind) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "no zeus::Error thrown";
  return "";
}

class AmdSmiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    full_fake().reset();
    minimal_fake().reset();
  }

  // A clock whose sleep advances manual time and the fake's energy accumulators together, and
  // records each sleep: it makes the validation window deterministic.
  class FakeTimeClock final : public zeus::Clock {
   public:
    FakeTimeClock(std::shared_ptr<zeus::ManualClock> time, FakeLibrary& fake,
                  std::vector<double>& sleeps_s)
        : time_(std::move(time)), fake_(&fake), sleeps_s_(&sleeps_s) {}
    std::int64_t now_ns() const override { return time_->now_ns(); }
    void sleep_for_ns(std::int64_t duration_ns) const override {
      const double seconds = static_cast<double>(duration_ns) / 1e9;
      sleeps_s_->push_back(seconds);
      time_->sleep_for_ns(duration_ns);
      fake_->advance_time_s(seconds);
    }

   private:
    std::shared_ptr<zeus::ManualClock> time_;
    FakeLibrary* fake_;
    std::vector<double>* sleeps_s_;
  };

  zeus::device::AmdSmiOptions options(FakeLibrary& fake) {
    zeus::device::AmdSmiOptions result;
    result.validation_window_s = 0.5;
    result.clock = std::make_shared<FakeTimeClock>(clock_, fake, sleeps_s_);
    result.env = env_of({});
    return result;
  }

  std::shared_ptr<zeus::device::GpuProvider> open(const nlohmann::json& script,
                                                  FakeLibrary& fake = full_fake()) {
    fake.configure(script);
    return zeus::device::open_amdsmi_with_options(fake.path(), options(fake));
  }

  std::shared_ptr<zeus::ManualClock> clock_ = std::make_shared<zeus::ManualClock>();
  std::vector<double> sleeps_s_;
};

}  // namespace zeus::testing::amdsmi
