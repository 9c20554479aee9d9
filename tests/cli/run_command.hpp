// Running a shell command from a test and collecting what it printed and its exit code.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace zeus::testing {

struct CommandOutput {
  int exit_code = -1;  // -1 when the command did not exit normally
  std::string output;  // standard output (add " 2>&1" to the command to include standard error)
};

inline CommandOutput run_command(const std::string& command) {
  CommandOutput result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    throw std::runtime_error("popen failed for: " + command);
  }
  std::array<char, 4096> buffer{};
  std::size_t read = 0;
  while ((read = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), read);
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The whole content of a file; "" when it cannot be read.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  std::stringstream text;
  text << stream.rdbuf();
  return text.str();
}

struct SplitOutput {
  int exit_code = -1;  // -1 when the command did not exit normally
  std::string out;     // standard output
  std::string err;     // standard error
};

// Runs `command` with its standard error redirected to the file `err_path` (removed afterwards),
// and returns both streams apart.
inline SplitOutput run_split(const std::string& command, const std::filesystem::path& err_path) {
  const CommandOutput run = run_command(command + " 2>'" + err_path.string() + "'");
  SplitOutput result{run.exit_code, run.output, read_file(err_path)};
  std::error_code ignored;
  std::filesystem::remove(err_path, ignored);
  return result;
}

}  // namespace zeus::testing
