// The one progress bar of the CLI's long-running commands (zeus sim, zeus profile): a line on
// standard error, redrawn in place, only when standard error is a terminal (so that logs and
// pipes never receive carriage returns).
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <iostream>
#include <string_view>

namespace zeus::cli {

class ProgressBar {
 public:
  static constexpr std::size_t kWidth = 30;

  ProgressBar() : enabled_(isatty(STDERR_FILENO) == 1) {}
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  ~ProgressBar() { clear(); }

  // " [#####.........] TEXT": `done` of `total` filled (nothing is drawn when total is 0).
  void show(std::size_t done, std::size_t total, std::string_view text) {
    if (!enabled_ || total == 0) {
      return;
    }
    const std::size_t filled = kWidth * std::min(done, total) / total;
    std::cerr << fmt::format("\r\033[K [{:#<{}}{:.<{}}] {}", "", filled, "", kWidth - filled, text)
              << std::flush;
  }

  void clear() {
    if (enabled_) {
      std::cerr << "\r\033[K" << std::flush;
    }
  }

 private:
  bool enabled_;
};

}  // namespace zeus::cli
