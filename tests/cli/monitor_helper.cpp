// A command for `zeus monitor` to run in tests:
//   monitor_helper wait READY_FILE [CODE | ignore-stop]
//   monitor_helper record READY_FILE LOG_FILE
// `wait` installs its signal dispositions, writes its pid to READY_FILE, then waits for a signal.
// With CODE, SIGINT and SIGTERM make it exit with CODE; with ignore-stop, both are ignored (only
// SIGKILL ends it); without, they kill it (default action).
// `record` appends the number of every SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 it gets to LOG_FILE,
// one a line, and goes on; SIGTERM makes it exit with 7.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

int g_exit_code = 0;
int g_log_fd = -1;

void exit_with_code(int /*signal*/) {
  ::_exit(g_exit_code);
}

void record_signal(int signal) {
  char line[8];
  const int length = std::snprintf(line, sizeof line, "%d\n", signal);
  [[maybe_unused]] const ssize_t written = ::write(g_log_fd, line, static_cast<size_t>(length));
}

void handle(int signal, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  ::sigaction(signal, &action, nullptr);
}

int usage() {
  std::fprintf(stderr,
               "usage: monitor_helper wait READY_FILE [CODE | ignore-stop]\n"
               "       monitor_helper record READY_FILE LOG_FILE\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    return usage();
  }
  if (std::strcmp(argv[1], "record") == 0) {
    if (argc < 4) {
      return usage();
    }
    g_log_fd = ::open(argv[3], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (g_log_fd < 0) {
      return 3;
    }
    for (const int signal : {SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) {
      handle(signal, record_signal);
    }
    g_exit_code = 7;
    handle(SIGTERM, exit_with_code);
  } else if (std::strcmp(argv[1], "wait") != 0) {
    return usage();
  } else if (argc > 3 && std::strcmp(argv[3], "ignore-stop") == 0) {
    handle(SIGINT, SIG_IGN);
    handle(SIGTERM, SIG_IGN);
  } else if (argc > 3) {
    g_exit_code = std::atoi(argv[3]);
    handle(SIGINT, exit_with_code);
    handle(SIGTERM, exit_with_code);
  }
  {
    const std::string temporary = std::string(argv[2]) + ".tmp";
    std::ofstream(temporary) << ::getpid() << "\n";
    std::rename(temporary.c_str(), argv[2]);  // appears complete, at once
  }
  for (int i = 0; i < 60; ++i) {  // at most a minute, in case nobody signals
    ::sleep(1);
  }
  return 0;
}
