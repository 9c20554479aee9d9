// `zeus sim` run from a test (sim_cli_test.cpp, sim_cli_errors_test.cpp): its output split into
// standard output and error, parsed as JSON, and fresh folders for its files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "run_command.hpp"

namespace zeus::testing::sim_cli {

using Result = zeus::testing::SplitOutput;

// Runs `zeus sim ARGUMENTS`, with standard error in a temporary file.
inline Result run_sim(const std::string& arguments) {
  return zeus::testing::run_split(std::string(ZEUS_CLI_PATH) + " sim " + arguments,
                                  std::filesystem::path(::testing::TempDir()) /
                                      ("zeus_sim_stderr_" + std::to_string(getpid()) + ".txt"));
}

inline nlohmann::json parse_json(const Result& result) {
  try {
    return nlohmann::json::parse(result.out);
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error(std::string(error.what()) + " in: " + result.out + result.err);
  }
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A fresh directory under the test temporary directory.
inline std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("zeus_sim_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace zeus::testing::sim_cli
