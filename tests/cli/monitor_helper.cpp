// A command for `zeus monitor` to run in tests:
//   monitor_helper wait READY_FILE [CODE]
// installs its signal dispositions, writes its pid to READY_FILE, then waits for a signal. With
// CODE, SIGINT and SIGTERM make it exit with CODE; without, they kill it (default action).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

int g_exit_code = 0;

void exit_with_code(int /*signal*/) {
  ::_exit(g_exit_code);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || std::strcmp(argv[1], "wait") != 0) {
    std::fprintf(stderr, "usage: monitor_helper wait READY_FILE [CODE]\n");
    return 2;
  }
  if (argc > 3) {
    g_exit_code = std::atoi(argv[3]);
    struct sigaction action {};
    action.sa_handler = exit_with_code;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, nullptr);
    ::sigaction(SIGTERM, &action, nullptr);
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
