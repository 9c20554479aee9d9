// The zeusd executable end to end: settings restored when the client process that changed them
// dies (within a second), everything restored on SIGTERM, and JWT tokens from `zeusd token
// issue` enforced by `zeusd serve --signing-key-path`.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/spawned_process.hpp"
#include "support/temp_dir.hpp"
#include "support/wait_until.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using zeus::testing::TempDir;
using zeus::testing::wait_until;

httplib::Client uds_client(const fs::path& socket) {
  httplib::Client client(socket.string(), 80);
  client.set_address_family(AF_UNIX);
  return client;
}

std::vector<std::string> serve_arguments(const fs::path& socket, std::vector<std::string> extra) {
  std::vector<std::string> args = {ZEUSD_PATH, "serve", "--socket-path", socket.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// A zeusd process on 1 simulated A100 (limits 100-400 W), its output in <dir>/zeusd.log.
class Zeusd {
 public:
  Zeusd(const fs::path& dir, std::vector<std::string> extra = {})
      : socket_(dir / "zeusd.sock"),
        process_(serve_arguments(socket_, std::move(extra)), dir / "zeusd.log",
                 {{"ZEUS_SIMULATED_GPUS", "1:a100"}, {"ZEUS_LOG_LEVEL", "info"}}) {
    // Up to 30 s: an ASan build on a loaded machine (ctest -j) can take seconds to start.
    std::optional<int> exited;
    const bool up = wait_until(
        [&] {
          auto client = uds_client(socket_);
          if (auto res = client.Get("/discover"); res && res->status == 200) {
            return true;
          }
          exited = process_.wait_for(std::chrono::milliseconds(0));
          return exited.has_value();
        },
        std::chrono::seconds(30));
    if (exited) {
      ADD_FAILURE() << "zeusd exited at start (status " << *exited << "):\n" << log();
    } else if (!up) {
      ADD_FAILURE() << "zeusd did not start within 30 s:\n" << log();
    }
  }
  int terminate() {
    process_.signal(SIGTERM);
    return process_.wait_for(std::chrono::seconds(60)).value_or(-1);
  }
  const fs::path& socket() const { return socket_; }
  std::string log() const { return process_.log(); }
  // The GPU's power limit as the daemon reports it.
  long long power_limit_mw() const {
    auto client = uds_client(socket_);
    auto res = client.Get("/gpu/get_power_limit?gpu_ids=0");
    if (!res || res->status != 200) {
      return -1;
    }
    return json::parse(res->body)["0"]["power_limit_mw"].get<long long>();
  }

 private:
  fs::path socket_;
  zeus::testing::SpawnedProcess process_;
};

// A child process that sets the limit through the daemon, reports, then waits to be killed.
pid_t child_setting_limit(const fs::path& socket, long long limit_mw) {
  const pid_t pid = fork();
  if (pid == 0) {
    auto client = uds_client(socket);
    auto res =
        client.Post(("/gpu/set_power_limit?gpu_ids=0&power_limit_mw=" + std::to_string(limit_mw) +
                     "&block=true")
                        .c_str());
    if (!res || res->status != 200) {
      ::_exit(3);
    }
    for (;;) {
      ::pause();
    }
  }
  return pid;
}

TEST(ZeusdEndToEnd, ALimitIsRestoredWithinASecondOfItsOwnerDying) {
  const TempDir temp("zeusd-e2e");
  const fs::path dir = temp.path();
  Zeusd zeusd(dir);
  const long long original = zeusd.power_limit_mw();
  ASSERT_GT(original, 0);
  const pid_t child = child_setting_limit(zeusd.socket(), 250000);
  ASSERT_TRUE(wait_until([&] { return zeusd.power_limit_mw() == 250000; },
                         std::chrono::milliseconds(3000)));
  ::kill(child, SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(wait_until([&] { return zeusd.power_limit_mw() == original; },
                         std::chrono::milliseconds(1000)))
      << "still " << zeusd.power_limit_mw();
  const double restore_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_LT(restore_ms, 1000.0);
  std::cout << "restored " << restore_ms << " ms after SIGKILL\n";
}

TEST(ZeusdEndToEnd, NoRestoreKeepsTheReferenceBehaviour) {
  const TempDir temp("zeusd-e2e");
  const fs::path dir = temp.path();
  Zeusd zeusd(dir, {"--no-restore"});
  const pid_t child = child_setting_limit(zeusd.socket(), 200000);
  ASSERT_TRUE(wait_until([&] { return zeusd.power_limit_mw() == 200000; },
                         std::chrono::milliseconds(3000)));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(zeusd.power_limit_mw(), 200000);
}

TEST(ZeusdEndToEnd, SigtermRestoresEverything) {
  const TempDir temp("zeusd-e2e");
  const fs::path dir = temp.path();
  Zeusd zeusd(dir);
  const pid_t child = child_setting_limit(zeusd.socket(), 150000);
  ASSERT_TRUE(wait_until([&] { return zeusd.power_limit_mw() == 150000; },
                         std::chrono::milliseconds(3000)));
  // The simulated GPU lives in the daemon's process: what it restored on SIGTERM shows in its
  // log, which says how many settings it put back.
  const int status = zeusd.terminate();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_NE(zeusd.log().find("restored 1 changed setting(s) on shutdown"), std::string::npos)
      << zeusd.log();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST(ZeusdEndToEnd, TokensFromTokenIssueAreEnforced) {
  const TempDir temp("zeusd-e2e");
  const fs::path dir = temp.path();
  const fs::path key = dir / "key";
  std::ofstream(key) << std::string(48, 'k');
  ::chmod(key.c_str(), 0600);
  auto issue = [&](const std::string& scopes) {
    const std::string command = std::string(ZEUSD_PATH) + " token issue --signing-key-path " +
                                key.string() + " --sub alice --scopes " + scopes;
    FILE* pipe = ::popen(command.c_str(), "r");
    std::string token;
    char buffer[1024];
    while (::fgets(buffer, sizeof(buffer), pipe) != nullptr) {
      token += buffer;
    }
    ::pclose(pipe);
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) {
      token.pop_back();
    }
    return token;
  };
  const std::string reader = issue("gpu-read");
  const std::string controller = issue("gpu-read,gpu-control");
  ASSERT_EQ(std::count(reader.begin(), reader.end(), '.'), 2) << reader;

  Zeusd zeusd(dir, {"--signing-key-path", key.string()});
  auto client = uds_client(zeusd.socket());
  auto res = client.Get("/gpu/get_power_limit?gpu_ids=0");
  EXPECT_EQ(res->status, 401);
  EXPECT_EQ(res->get_header_value("WWW-Authenticate"), "Bearer realm=\"zeusd\"");
  client.set_bearer_token_auth(reader);
  EXPECT_EQ(client.Get("/gpu/get_power_limit?gpu_ids=0")->status, 200);
  res = client.Post("/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000&block=true");
  EXPECT_EQ(res->status, 403);
  EXPECT_NE(res->body.find("lacks required scope 'gpu-control'"), std::string::npos) << res->body;
  client.set_bearer_token_auth(controller);
  EXPECT_EQ(client.Post("/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000&block=true")->status,
            200);
  res = client.Get("/auth/whoami");
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body)["sub"], "alice");
  client.set_bearer_token_auth(controller.substr(0, controller.size() - 2) + "xx");
  EXPECT_EQ(client.Get("/gpu/get_power_limit?gpu_ids=0")->status, 401);
  EXPECT_EQ(uds_client(zeusd.socket()).Get("/discover")->status, 200);  // always open
}

// The reference's shipped ZEUSD_ARGS start ours unchanged, and the log says where our defaults
// differ and which flag gives the reference's.
TEST(ZeusdEndToEnd, ReferenceDefaultsStartItAndTheDifferencesAreLogged) {
  const TempDir temp("zeusd-e2e");
  const fs::path dir = temp.path();
  {
    Zeusd zeusd(dir, {"--num-workers", "10"});
    EXPECT_EQ(uds_client(zeusd.socket()).Get("/discover")->status, 200);
    EXPECT_EQ(zeusd.terminate(), 0);
    const std::string log = zeusd.log();
    EXPECT_NE(log.find("unlike the reference zeusd, the socket is mode 660"), std::string::npos)
        << log;
    EXPECT_NE(log.find("`--socket-permissions 666`"), std::string::npos) << log;
    EXPECT_NE(log.find("`--no-restore`"), std::string::npos) << log;
  }
}

// An explicit --gpu-backend without GPUs fails at start, naming the backend and the fix.
TEST(ZeusdEndToEnd, ExplicitGpuBackendFailsFastWhenUnavailable) {
  const TempDir temp("zeusd-e2e");
  const fs::path dir = temp.path();
  for (const char* backend : {"nvml", "amdsmi"}) {
    const std::string command =
        "ZEUS_SIMULATED_GPUS=1:a100 ZEUS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "
        "ZEUS_AMDSMI_LIBRARY=/nonexistent/libamd_smi.so " +
        std::string(ZEUSD_PATH) + " serve --gpu-backend " + backend + " --socket-path " +
        (dir / "s.sock").string() + " 2>" + (dir / "err").string();
    const int status = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 1) << backend;
    std::ifstream in(dir / "err");
    const std::string err{std::istreambuf_iterator<char>(in), {}};
    EXPECT_NE(err.find(std::string("--gpu-backend ") + backend + ": no GPU from that backend"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("--gpu-backend auto"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(dir / "s.sock"));
  }
}

// --gpu-command-overrides end to end: the command does the write, and the restore on SIGTERM goes
// through the same command; a bad file stops the start with its location.
TEST(ZeusdEndToEnd, CommandOverridesWriteAndRestore) {
  const TempDir temp("zeusd-e2e");
  const fs::path dir = temp.path();
  const fs::path script = dir / "record.sh";
  std::ofstream(script) << "#!/bin/sh\necho \"$@\" >> " << (dir / "argv.log").string() << "\n";
  ::chmod(script.c_str(), 0755);
  const fs::path overrides = dir / "overrides.toml";
  std::ofstream(overrides) << "[set_power_limit]\ncommands = [\"" << script.string()
                           << " {gpu_id} {power_limit_w}\"]\ntimeout_s = 10\n";
  ::chmod(overrides.c_str(), 0600);
  {
    Zeusd zeusd(dir, {"--gpu-command-overrides", overrides.string()});
    auto client = uds_client(zeusd.socket());
    auto res = client.Post("/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000&block=true");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(zeusd.power_limit_mw(), 400000);  // the command, not the library, did the write
    EXPECT_EQ(zeusd.terminate(), 0);
    const std::string log = zeusd.log();
    EXPECT_NE(log.find("GPU control through the commands of"), std::string::npos) << log;
  }
  std::ifstream in(dir / "argv.log");
  const std::string argv_log{std::istreambuf_iterator<char>(in), {}};
  EXPECT_EQ(argv_log, "0 300\n0 400\n");  // the write, then the restore of the original 400 W

  std::ofstream(overrides) << "[set_power_limit]\ncommands = [\"x {watts}\"]\n";
  const std::string command = "ZEUS_SIMULATED_GPUS=1:a100 " + std::string(ZEUSD_PATH) +
                              " serve --gpu-command-overrides " + overrides.string() +
                              " --socket-path " + (dir / "s.sock").string() + " 2>" +
                              (dir / "err").string();
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::ifstream err_in(dir / "err");
  const std::string err{std::istreambuf_iterator<char>(err_in), {}};
  EXPECT_NE(err.find(overrides.string() + ":2:"), std::string::npos) << err;
  EXPECT_NE(err.find("unknown placeholder {watts}"), std::string::npos) << err;
}

}  // namespace
