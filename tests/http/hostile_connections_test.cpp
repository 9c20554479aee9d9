// The lock-out of issue 27 at its real scale, against the three servers as processes: 16 source
// addresses x 256 idle sockets (sending nothing) against `zeus bso serve`, `zeus exporter` and
// `zeusd serve` over TCP, and 16 uids x 256 on zeusd's Unix socket; a good client must be
// answered within 2 s on every probe. Idle connections give way to newcomers under pressure.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "http/raw_client.hpp"
#include "http/running_servers.hpp"

namespace {

using namespace std::chrono_literals;
using zeus::testing::RawClient;
using zeus::testing::RunningServer;
using zeus::testing::TempDir;

constexpr int kPeers = 16;
constexpr int kSocketsPerPeer = 256;
constexpr int kProbes = 8;

// Room for 16 x 256 sockets and the probes.
void raise_descriptor_limit() {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, 16384);
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

std::string peer_address(int peer) {
  return "127.0.0." + std::to_string(2 + peer);
}

// `sockets` idle connections from each of kPeers addresses (a refused or evicted one is kept:
// the kernel completed it, and it is what a hostile client would hold).
void open_idle(const RunningServer& server, int sockets, std::vector<RawClient>& idle) {
  for (int i = 0; i < sockets; ++i) {
    for (int peer = 0; peer < kPeers; ++peer) {
      idle.push_back(RawClient::tcp(server.port, peer_address(peer)));
    }
  }
}

// A good client's GET from 127.0.0.1 (or over the Unix socket) answered 200 within 2 s.
void expect_answered(const RunningServer& server, const std::string& path, int probe) {
  const auto started = std::chrono::steady_clock::now();
  RawClient client = server.connect();
  ASSERT_TRUE(client.send("GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  auto response = client.read_response(2s);
  ASSERT_TRUE(response) << "probe " << probe << " got no answer within 2 s";
  EXPECT_EQ(response->status, 200) << "probe " << probe << ": " << response->body;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s) << "probe " << probe;
}

void good_client_is_answered(const RunningServer& server, const std::string& path) {
  raise_descriptor_limit();
  std::vector<RawClient> idle;
  idle.reserve(kPeers * (kSocketsPerPeer + kProbes * 4));
  open_idle(server, kSocketsPerPeer, idle);
  for (int probe = 0; probe < kProbes; ++probe) {
    expect_answered(server, path, probe);
    open_idle(server, 4, idle);  // the pressure stays
  }
}

TEST(HostileConnections, BsoServerAnswersBeside16PeersOfIdleSockets) {
  TempDir dir("zeus-lockout");
  const RunningServer server = zeus::testing::start_bso(dir);
  good_client_is_answered(server, "/healthz");
}

TEST(HostileConnections, ExporterAnswersBeside16PeersOfIdleSockets) {
  TempDir dir("zeus-lockout");
  const RunningServer server = zeus::testing::start_exporter(dir);
  good_client_is_answered(server, "/metrics");
}

TEST(HostileConnections, ZeusdOverTcpAnswersBeside16PeersOfIdleSockets) {
  TempDir dir("zeus-lockout");
  const RunningServer server = zeus::testing::start_zeusd(dir, true);
  good_client_is_answered(server, "/time");
}

// 16 children, each setuid to its own uid, hold 256 idle connections on zeusd's socket until
// the test lets them go; root (a 17th uid) probes.
TEST(HostileConnections, ZeusdUnixSocketAnswersBeside16UidsOfIdleSockets) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root: the hostile peers are children that setuid to 16 other uids";
  }
  raise_descriptor_limit();
  TempDir dir("zeus-lockout");
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const RunningServer server =
      zeus::testing::start_zeusd(dir, false, {"--socket-permissions", "666"});
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, server.socket_path.c_str(), sizeof(address.sun_path) - 1);
  int ready[2];
  int release[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(release, O_CLOEXEC), 0);
  std::vector<pid_t> children;
  for (int peer = 0; peer < kPeers; ++peer) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      // Async-signal-safe calls only from here on.
      ::close(ready[0]);
      ::close(release[1]);
      const uid_t uid = static_cast<uid_t>(60000 + peer);
      if (::setgid(uid) != 0 || ::setuid(uid) != 0) {
        ::_exit(2);
      }
      for (int i = 0; i < kSocketsPerPeer; ++i) {
        const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0 ||
            ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
          ::_exit(3);
        }
      }
      char byte = 'r';
      if (::write(ready[1], &byte, 1) != 1) {
        ::_exit(4);
      }
      ::close(ready[1]);  // the test sees the end of `ready` once every child wrote or exited
      ::read(release[0], &byte, 1);  // returns when the test closes its end
      ::_exit(0);
    }
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      break;
    }
    children.push_back(pid);
  }
  ::close(ready[1]);
  ::close(release[0]);
  int ready_count = 0;
  char byte;
  while (ready_count < static_cast<int>(children.size()) && ::read(ready[0], &byte, 1) == 1) {
    ++ready_count;
  }
  EXPECT_EQ(ready_count, kPeers) << "a child could not connect: " << server.process->log();
  for (int probe = 0; probe < kProbes; ++probe) {
    expect_answered(server, "/gpu/get_power_limit", probe);
  }
  ::close(release[1]);
  ::close(ready[0]);
  for (const pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid;
  }
}

}  // namespace
