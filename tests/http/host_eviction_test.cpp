// The host's connection cap under pressure: idle connections and ones that have not sent a
// request head give way to newcomers (the greediest peer's oldest idle first); connections
// handling, writing or streaming never do; a peer's own cap still holds; and the cap does not
// drift under churn from several I/O threads.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/host.hpp"
#include "http/raw_client.hpp"
#include "support/wait_until.hpp"

namespace zeus::http {
namespace {

using namespace std::chrono_literals;
using testing::RawClient;

std::string peer_address(int peer) {
  return "127.0.0." + std::to_string(2 + peer);
}

std::string get(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
}

// A handler that holds /hold until released, streams /stream, and answers the rest at once.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  bool open = false;
  void release() {
    std::lock_guard lock(mutex);
    open = true;
    changed.notify_all();
  }
  void handle(const Request& request, Response& response) {
    response.content_type = "text/plain";
    if (request.path == "/hold") {
      std::unique_lock lock(mutex);
      changed.wait(lock, [this] { return open; });
    } else if (request.path == "/stream") {
      response.content_type = "text/event-stream";
      response.stream = std::make_shared<StreamSource>();
      response.stream->period = 50ms;
      response.stream->next = [](std::string& out) {
        out = "data: tick\n\n";
        return true;
      };
      return;
    }
    response.body = "ok";
  }
};

struct SmallHost {
  SmallHost(std::size_t max_connections, std::size_t per_peer, Gate* gate = nullptr,
            int io_threads = 1)
      : host(options(max_connections, per_peer, io_threads),
             [gate](const Request& request, Response& response) {
               if (gate != nullptr) {
                 gate->handle(request, response);
               } else {
                 response.body = "ok";
               }
             }) {
    port = host.bind_tcp("127.0.0.1", 0);
    host.start();
  }
  ~SmallHost() {
    host.stop();
    host.join();
  }
  static HostOptions options(std::size_t max_connections, std::size_t per_peer, int io_threads) {
    HostOptions options;
    options.limits.max_connections = max_connections;
    options.limits.max_connections_per_peer = per_peer;
    options.limits.shutdown_grace = 2s;
    options.io_threads = io_threads;
    options.worker_threads = 16;
    return options;
  }
  Host host;
  int port = 0;
};

// A good client's request from 127.0.0.1, answered 200 within 2 s.
void expect_answered(int port, int probe) {
  const auto started = std::chrono::steady_clock::now();
  RawClient client = RawClient::tcp(port);
  ASSERT_TRUE(client.send(get("/probe")));
  auto response = client.read_response(2s);
  ASSERT_TRUE(response) << "probe " << probe << " got no answer";
  EXPECT_EQ(response->status, 200) << "probe " << probe << ": " << response->body;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s) << "probe " << probe;
}

TEST(HttpHostEviction, IdleSocketsFromSixteenPeersDoNotLockOutANewcomer) {
  SmallHost server(64, 16);
  std::vector<RawClient> idle;
  for (int round = 0; round < 16; ++round) {
    for (int peer = 0; peer < 16; ++peer) {
      idle.push_back(RawClient::tcp(server.port, peer_address(peer)));
    }
  }
  ASSERT_TRUE(testing::wait_until(
      [&] { return server.host.stats().connections_accepted >= 16u * 16u; }, 5s));
  for (int probe = 0; probe < 8; ++probe) {
    expect_answered(server.port, probe);
    // More idle sockets between probes: the pressure stays.
    for (int peer = 0; peer < 16; ++peer) {
      idle.push_back(RawClient::tcp(server.port, peer_address(peer)));
    }
  }
  const HostStats stats = server.host.stats();
  EXPECT_GE(stats.connections_evicted, 16u * 16u - 64u);
  EXPECT_EQ(stats.connections_refused, 0u);
  EXPECT_TRUE(testing::wait_until([&] { return server.host.stats().open_connections <= 64u; }));
}

TEST(HttpHostEviction, TheGreediestPeerGivesWayFirst) {
  SmallHost server(8, 8);
  std::vector<RawClient> greedy;
  for (int i = 0; i < 6; ++i) {
    greedy.push_back(RawClient::tcp(server.port, peer_address(0)));
  }
  RawClient modest_one = RawClient::tcp(server.port, peer_address(1));
  RawClient modest_two = RawClient::tcp(server.port, peer_address(1));
  ASSERT_TRUE(testing::wait_until([&] { return server.host.stats().open_connections == 8u; }));
  RawClient newcomer = RawClient::tcp(server.port, peer_address(2));
  // The greedy peer's oldest idle socket goes; the modest peer's stay.
  EXPECT_TRUE(greedy.front().closed_within(2s));
  EXPECT_FALSE(modest_one.closed_within(200ms));
  EXPECT_FALSE(modest_two.closed_within(10ms));
  ASSERT_TRUE(newcomer.send(get("/x")));
  auto response = newcomer.read_response(2s);
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(server.host.stats().connections_evicted, 1u);
}

TEST(HttpHostEviction, HandlingAndStreamingConnectionsAreNeverEvicted) {
  Gate gate;
  SmallHost server(8, 8, &gate);
  std::vector<RawClient> held;
  std::vector<RawClient> streams;
  for (int i = 0; i < 4; ++i) {
    held.push_back(RawClient::tcp(server.port, peer_address(0)));
    ASSERT_TRUE(held.back().send(get("/hold")));
    streams.push_back(RawClient::tcp(server.port, peer_address(0)));
    ASSERT_TRUE(streams.back().send(get("/stream")));
    auto head = streams.back().read_head_only(2s);
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, 200);
  }
  ASSERT_TRUE(testing::wait_until([&] { return server.host.stats().open_connections == 8u; }));
  // Nothing is evictable: a newcomer gets the 503 it always got.
  RawClient newcomer = RawClient::tcp(server.port, peer_address(1));
  auto refused = newcomer.read_response(2s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(server.host.stats().connections_evicted, 0u);
  for (auto& stream : streams) {
    EXPECT_TRUE(stream.read_chunk(2s)) << "a stream was cut";
  }
  gate.release();
  for (auto& client : held) {
    auto response = client.read_response(2s);
    ASSERT_TRUE(response) << "a held request was cut";
    EXPECT_EQ(response->status, 200);
  }
}

TEST(HttpHostEviction, APeersOwnCapStillHolds) {
  SmallHost server(64, 4);
  std::vector<RawClient> mine;
  for (int i = 0; i < 4; ++i) {
    mine.push_back(RawClient::tcp(server.port, peer_address(0)));
  }
  ASSERT_TRUE(testing::wait_until([&] { return server.host.stats().open_connections == 4u; }));
  RawClient fifth = RawClient::tcp(server.port, peer_address(0));
  auto response = fifth.read_response(2s);
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 503);
  EXPECT_EQ(server.host.stats().connections_evicted, 0u);
  for (auto& client : mine) {
    EXPECT_FALSE(client.closed_within(10ms));
  }
}

// Peers connecting, asking and leaving on four I/O threads: the cap neither leaks upward
// (beyond a few victims that turned busy before they could close) nor shrinks.
TEST(HttpHostEviction, TheCapDoesNotDriftUnderChurn) {
  constexpr std::size_t kCap = 32;
  SmallHost server(kCap, kCap, nullptr, 4);
  std::atomic<bool> done{false};
  std::atomic<std::size_t> most_open{0};
  std::thread watcher([&] {
    while (!done) {
      const HostStats stats = server.host.stats();
      const std::size_t open = stats.open_connections - stats.evicting_connections;
      std::size_t seen = most_open;
      while (open > seen && !most_open.compare_exchange_weak(seen, open)) {
      }
      std::this_thread::sleep_for(1ms);
    }
  });
  std::vector<std::thread> peers;
  for (int peer = 0; peer < 8; ++peer) {
    peers.emplace_back([&, peer] {
      std::deque<RawClient> mine;
      for (int i = 0; i < 60; ++i) {
        mine.push_back(RawClient::tcp(server.port, peer_address(peer)));
        if (i % 3 == 0) {
          mine.back().send(get("/x"));
          mine.back().read_response(2s);
        }
        if (mine.size() > 10) {
          mine.pop_front();
        }
      }
    });
  }
  for (auto& thread : peers) {
    thread.join();
  }
  done = true;
  watcher.join();
  EXPECT_LE(most_open.load(), kCap + 4);
  ASSERT_TRUE(testing::wait_until([&] { return server.host.stats().open_connections == 0u; }));
  // Exactly the cap is admitted again without evicting anyone: no slot leaked.
  const std::uint64_t evicted = server.host.stats().connections_evicted;
  std::vector<RawClient> fill;
  for (std::size_t i = 0; i < kCap; ++i) {
    fill.push_back(RawClient::tcp(server.port, peer_address(static_cast<int>(i % 8))));
  }
  ASSERT_TRUE(testing::wait_until([&] { return server.host.stats().open_connections == kCap; }));
  EXPECT_EQ(server.host.stats().connections_evicted, evicted);
  for (auto& client : fill) {
    EXPECT_FALSE(client.closed_within(1ms));
  }
}

}  // namespace
}  // namespace zeus::http
