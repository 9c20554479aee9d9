// A test helper: what the library logs (every module's logger, common/log.hpp) while it is
// alive, as text.
#pragma once

#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>

#include "common/log.hpp"

namespace zeus::testing {

class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    sink_->set_pattern("%l %v");
    for (const std::string_view name : zeus::log_module_names()) {
      zeus::module_log(name).sinks().push_back(sink_);
    }
  }
  ~LogCapture() {
    for (const std::string_view name : zeus::log_module_names()) {
      auto& sinks = zeus::module_log(name).sinks();
      sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    }
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::string text() {
    for (const std::string_view name : zeus::log_module_names()) {
      zeus::module_log(name).flush();
    }
    return text_.str();
  }
  // How many times `needle` occurs in what was logged.
  int count(const std::string& needle) {
    const std::string all = text();
    int found = 0;
    for (auto at = all.find(needle); at != std::string::npos; at = all.find(needle, at + 1)) {
      ++found;
    }
    return found;
  }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

}  // namespace zeus::testing
