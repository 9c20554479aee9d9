// A program started by a test: fork/exec with extra environment, stdout and stderr to a log
// file, SIGKILLed and reaped when the object goes.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace zeus::testing {

class SpawnedProcess {
 public:
  SpawnedProcess(std::vector<std::string> args, const std::filesystem::path& log,
                 std::vector<std::pair<std::string, std::string>> env = {})
      : log_(log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      for (const auto& [name, value] : env) {
        ::setenv(name.c_str(), value.c_str(), 1);
      }
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& arg : args) {
        argv.push_back(arg.data());
      }
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~SpawnedProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  SpawnedProcess(const SpawnedProcess&) = delete;
  SpawnedProcess& operator=(const SpawnedProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Does nothing once the process has been reaped (kill(-1) would signal every process).
  void signal(int number) const {
    if (pid_ > 0) {
      ::kill(pid_, number);
    }
  }
  // The wait status once the process exits within `timeout`; nullopt if it is still running.
  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      int status = 0;
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        return status;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::string log() const {
    std::ifstream in(log_);
    return {std::istreambuf_iterator<char>(in), {}};
  }

 private:
  std::filesystem::path log_;
  pid_t pid_ = -1;
};

// Waits for a program to write its port into `path`; 0 if it did not within `timeout`.
inline int wait_for_port_file(const std::filesystem::path& path,
                              std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    int port = 0;
    if (in >> port && port > 0) {
      return port;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

// A process id that no process has: a child that has exited and been reaped (an owner that is
// gone, for the ledger and the Slurm plugin's state files).
inline pid_t reaped_pid() {
  const pid_t child = ::fork();
  if (child == 0) {
    ::_exit(0);
  }
  ::waitpid(child, nullptr, 0);
  return child;
}

}  // namespace zeus::testing
