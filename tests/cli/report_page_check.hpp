// What the `zeus report` tests share: a fresh directory per test to run zeus in, input files
// written there, and the chart data read back out of the page it writes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "run_command.hpp"

namespace zeus::testing {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// An empty directory <gtest temp>/<prefix><test name>_<pid>, for the current test.
inline std::filesystem::path fresh_test_dir(const std::string& prefix) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      (prefix + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
       std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `[ENV] zeus ARGUMENTS` in `dir`.
inline SplitOutput run_zeus_in(const std::filesystem::path& dir, const std::string& arguments,
                               const std::string& env = "") {
  return run_split(
      "cd '" + dir.string() + "' && " + env + " " + std::string(ZEUS_CLI_PATH) + " " + arguments,
      dir / "stderr.txt");
}

// The chart specifications embedded in the page.
inline nlohmann::json page_data(const std::string& html) {
  const std::string start = "<script type=\"application/json\" id=\"zeus-report-data\">";
  const auto begin = html.find(start);
  if (begin == std::string::npos) {
    throw std::runtime_error("no #zeus-report-data in the page");
  }
  const auto end = html.find("</script>", begin);
  return nlohmann::json::parse(html.substr(begin + start.size(), end - begin - start.size()));
}

}  // namespace zeus::testing
