// zeusd's sockets: mode 0660 and removal on stop, explicit permissions, the stale/live/non-socket
// rules, TCP, who needs root, another user refused; and the zeusd executable's serve, SIGTERM and
// bad flags.
#include "daemon/daemon.hpp"
#include "support/running_daemon.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace zeus::daemon {
namespace {

using nlohmann::json;

TEST(ZeusdTest, SocketIsMode0660AndRemovedOnStop) {
  fs::path socket_path;
  {
    Running d({});
    socket_path = d.daemon().config().socket_path;
    struct stat info {};
    ASSERT_EQ(::stat(socket_path.c_str(), &info), 0);
    EXPECT_TRUE(S_ISSOCK(info.st_mode));
    EXPECT_EQ(info.st_mode & 0777, 0660u);
  }
  EXPECT_FALSE(fs::exists(socket_path));
}

TEST(ZeusdTest, ExplicitPermissions) {
  DaemonConfig config;
  config.socket_permissions = 0666;
  Running d(config);
  struct stat info {};
  ASSERT_EQ(::stat(d.daemon().config().socket_path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0666u);
}

TEST(ZeusdTest, StaleSocketIsRemovedLiveOneRefusedFileKept) {
  TempDir dir;
  const fs::path path = dir.path() / "zeusd.sock";
  // A stale socket: bound, never listened on, closed.
  {
    const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(sock);
  }
  ASSERT_TRUE(fs::exists(path));
  DaemonConfig config;
  config.socket_path = path;
  Daemon first(config, simulated_gpus(1), {});
  ASSERT_NO_THROW(first.bind());
  std::thread serving([&] { first.serve(); });
  for (int i = 0; i < 500 && !first.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  // A live one: the second daemon refuses, and the first keeps serving.
  Daemon second(config, simulated_gpus(1), {});
  try {
    second.bind();
    ADD_FAILURE() << "a second daemon bound a live socket";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already listening"), std::string::npos) << e.what();
  }
  httplib::Client cli(path.string(), 80);
  cli.set_address_family(AF_UNIX);
  auto res = cli.Get("/time");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  first.stop();
  serving.join();

  // A regular file is never removed.
  const fs::path file = dir.path() / "not-a-socket";
  std::ofstream(file) << "data";
  try {
    prepare_socket_path(file);
    ADD_FAILURE() << "a regular file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a socket"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(file));
  // A missing parent directory is created.
  EXPECT_NO_THROW(prepare_socket_path(dir.path() / "run" / "zeusd" / "zeusd.sock"));
  EXPECT_TRUE(fs::is_directory(dir.path() / "run" / "zeusd"));
}

TEST(ZeusdTest, TcpMode) {
  DaemonConfig config;
  config.mode = TransportMode::kTcp;
  config.tcp_bind_address = "127.0.0.1:0";
  Daemon daemon(config, simulated_gpus(1), {});
  daemon.bind();
  ASSERT_GT(daemon.tcp_port(), 0);
  std::thread serving([&] { daemon.serve(); });
  for (int i = 0; i < 500 && !daemon.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  httplib::Client cli("127.0.0.1", daemon.tcp_port());
  auto res = cli.Get("/gpu/get_power_limit");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  daemon.stop();
  serving.join();
}

TEST(ZeusdTest, StartupPrivileges) {
  DaemonConfig config;
  EXPECT_NO_THROW(check_startup_privileges(config, device::GpuBackend::kSimulated, false));
  EXPECT_NO_THROW(check_startup_privileges(config, device::GpuBackend::kNvml, true));
  EXPECT_NO_THROW(check_startup_privileges(config, std::nullopt, false));
  try {
    check_startup_privileges(config, device::GpuBackend::kNvml, false);
    ADD_FAILURE() << "non-root start with gpu-control on NVML accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNoPermission);
    EXPECT_NE(std::string(e.what()).find("gpu-control"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("--read-only"), std::string::npos);
  }
  config.read_only = true;
  EXPECT_NO_THROW(check_startup_privileges(config, device::GpuBackend::kAmdSmi, false));
  config.read_only = false;
  config.enabled_groups = {ApiGroup::kGpuRead};
  EXPECT_NO_THROW(check_startup_privileges(config, device::GpuBackend::kNvml, false));
}

// Needs root: a process of another user is refused by the socket's mode 0660.
TEST(ZeusdTest, OtherUserCannotConnect) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to switch to another uid";
  }
  Running d({});
  // The directory must be traversable for the check to be about the socket itself.
  fs::permissions(d.dir(), fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec);
  const std::string path = d.daemon().config().socket_path.string();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) {
      ::_exit(3);
    }
    const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    const int rc = ::connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::_exit(rc == 0 ? 1 : (errno == EACCES ? 0 : 2));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: connected, 2: other errno, 3: setuid failed";
}

// The executable: starts on simulated GPUs, serves, exits 0 on SIGTERM and removes its socket.
TEST(ZeusdProcessTest, ServeAndSigterm) {
  TempDir dir;
  const fs::path path = dir.path() / "sub" / "zeusd.sock";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("ZEUS_SIMULATED_GPUS", "2:a100", 1);
    ::setenv("ZEUS_LOG_LEVEL", "warn", 1);
    ::execl(ZEUSD_PATH, "zeusd", "serve", "--socket-path", path.c_str(), nullptr);
    ::_exit(127);
  }
  bool up = false;
  for (int i = 0; i < 500 && !up; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    httplib::Client cli(path.string(), 80);
    cli.set_address_family(AF_UNIX);
    auto res = cli.Get("/discover");
    up = res && res->status == 200;
    if (up) {
      EXPECT_EQ(json::parse(res->body)["gpus"][0]["name"], "NVIDIA A100-SXM4-80GB");
    }
  }
  EXPECT_TRUE(up);
  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(path));
}

TEST(ZeusdProcessTest, BadFlagsAndRegularFileAtSocketPath) {
  TempDir dir;
  const fs::path file = dir.path() / "file";
  std::ofstream(file) << "keep me";
  auto run = [](const std::string& args) {
    const std::string command =
        "ZEUS_SIMULATED_GPUS=1 " + std::string(ZEUSD_PATH) + " " + args + " >/dev/null 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(run("serve --socket-path " + file.string()), 2);
  EXPECT_TRUE(fs::exists(file));
  EXPECT_EQ(run("serve --enable gpu-write --socket-path " + (dir.path() / "s").string()), 2);
  EXPECT_EQ(run("serve --socket-permissions 999 --socket-path " + (dir.path() / "s").string()), 2);
}

}  // namespace
}  // namespace zeus::daemon
