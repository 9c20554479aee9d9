// zeusd over a real Unix socket on simulated GPUs: every route, the three error shapes, peer
// credentials and the hooks (sockets: daemon_socket_test.cpp).
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

TEST(ZeusdTest, DiscoverAndTime) {
  Running d({});
  Reply r = get(d, "/discover");
  ASSERT_EQ(r.status, 200) << r.body;
  json body = json::parse(r.body);
  ASSERT_EQ(body["gpus"].size(), 2u);
  EXPECT_EQ(body["gpus"][1]["id"], 1);
  EXPECT_EQ(body["gpus"][0]["name"], "NVIDIA H200");
  const std::string pci = body["gpus"][0]["pci_address"];
  EXPECT_EQ(pci.size(), std::string("0000:18:00.0").size()) << pci;
  EXPECT_EQ(body["gpus"][0]["cumulative_energy_available"], true);
  EXPECT_EQ(body["cpus"],
            json::parse(R"([{"id":0,"dram_available":true},{"id":1,"dram_available":false}])"));
  EXPECT_EQ(body["enabled_api_groups"], json::parse(R"(["gpu-control","gpu-read","cpu-read"])"));
  EXPECT_EQ(body["auth_required"], false);

  r = get(d, "/time");
  ASSERT_EQ(r.status, 200);
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  EXPECT_NEAR(static_cast<double>(json::parse(r.body)["timestamp_ms"].get<std::int64_t>()),
              static_cast<double>(now_ms), 5000.0);
}

TEST(ZeusdTest, GpuReads) {
  Running d({}, 3);
  json limits = json::parse(get(d, "/gpu/get_power_limit").body);
  EXPECT_EQ(limits.size(), 3u);
  EXPECT_EQ(limits["0"]["power_limit_mw"], d.gpu(0).power_limit_mw());

  json constraints = json::parse(get(d, "/gpu/get_power_limit_constraints?gpu_ids=2,0,2").body);
  ASSERT_EQ(constraints.size(), 2u);
  EXPECT_EQ(constraints.begin().key(), "0");
  EXPECT_EQ(constraints["2"]["min_power_limit_mw"], d.gpu(2).power_limit_constraints_mw().min_mw);
  EXPECT_EQ(constraints["2"]["max_power_limit_mw"], d.gpu(2).power_limit_constraints_mw().max_mw);

  json energy = json::parse(get(d, "/gpu/get_cumulative_energy?gpu_ids=1").body);
  EXPECT_TRUE(energy["1"]["energy_mj"].is_number_unsigned());
  json persistence = json::parse(get(d, "/gpu/get_persistence_mode").body);
  EXPECT_EQ(persistence["0"]["enabled"], d.gpu(0).persistence_mode());
  json power = json::parse(get(d, "/gpu/get_power?gpu_ids=0,1").body);
  EXPECT_TRUE(power["timestamp_ms"].is_number());
  EXPECT_TRUE(power["power_mw"]["1"].is_number());
}

TEST(ZeusdTest, SetPowerLimitBlockingReportsPeerToHook) {
  std::mutex mutex;
  std::vector<WriteEvent> events;
  Running d({}, 2, {.on_write = [&](const WriteEvent& event) {
              std::lock_guard lock(mutex);
              events.push_back(event);
            }});
  const std::uint32_t before = d.gpu(1).power_limit_mw();
  const std::uint32_t target = d.gpu(1).power_limit_constraints_mw().min_mw + 50000;
  Reply r = post(d, "/gpu/set_power_limit?gpu_ids=1,0&power_limit_mw=" + std::to_string(target) +
                        "&block=true");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(d.gpu(0).power_limit_mw(), target);
  EXPECT_EQ(d.gpu(1).power_limit_mw(), target);
  std::lock_guard lock(mutex);
  ASSERT_EQ(events.size(), 2u);
  const WriteEvent& event = events[0].gpu_index == 1 ? events[0] : events[1];
  EXPECT_EQ(event.setting, Setting::kPowerLimit);
  EXPECT_EQ(setting_field(event.setting), "power_limit_mw");
  EXPECT_EQ(event.old_value, SettingValue::power_limit(before));
  EXPECT_EQ(event.new_value, SettingValue::power_limit(target));
  EXPECT_TRUE(event.peer.known);
  EXPECT_EQ(event.peer.pid, ::getpid());
  EXPECT_EQ(event.peer.uid, ::getuid());
}

TEST(ZeusdTest, SetPowerLimitNonBlocking) {
  Running d({});
  const std::uint32_t target = d.gpu(0).power_limit_constraints_mw().min_mw;
  Reply r = post(d, "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=" + std::to_string(target) +
                        "&block=false");
  ASSERT_EQ(r.status, 200) << r.body;
  for (int i = 0; i < 500 && d.gpu(0).power_limit_mw() != target; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(d.gpu(0).power_limit_mw(), target);
}

// Writes to one GPU never overlap: the hook (run inside the write) sees one at a time.
TEST(ZeusdTest, WritesToOneGpuAreSerialised) {
  std::atomic<int> in_flight{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> writes{0};
  Running d({}, 2, {.on_write = [&](const WriteEvent& event) {
              if (event.gpu_index != 0) {
                return;
              }
              if (in_flight.fetch_add(1) != 0) {
                overlaps.fetch_add(1);
              }
              std::this_thread::sleep_for(std::chrono::milliseconds(2));
              in_flight.fetch_sub(1);
              writes.fetch_add(1);
            }});
  const auto c = d.gpu(0).power_limit_constraints_mw();
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        const std::uint32_t limit = c.min_mw + static_cast<std::uint32_t>(t * 1000 + i);
        const Reply r =
            post(d, "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=" + std::to_string(limit) +
                        "&block=" + (i % 2 ? "true" : "false"));
        if (r.status == 200) {
          ok.fetch_add(1);
        }
      }
    });
  }
  for (auto& client : clients) {
    client.join();
  }
  EXPECT_EQ(ok.load(), 40);
  for (int i = 0; i < 1000 && writes.load() < 40; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(writes.load(), 40);
  EXPECT_EQ(overlaps.load(), 0);
}

TEST(ZeusdTest, BeforeWriteHookCanRefuseAndRunSerialized) {
  std::atomic<bool> refuse{true};
  std::mutex mutex;
  std::vector<std::string> seen;
  Running d({}, 2, {.before_write = [&](const WriteEvent& event) {
              std::lock_guard lock(mutex);
              seen.push_back(std::string(setting_field(event.setting)) + "=" +
                             value_text(event.setting, event.old_value.value()) + "->" +
                             value_text(event.setting, event.new_value.value()));
              if (refuse) {
                throw Error(ErrorKind::kNoPermission, "owner cannot be watched");
              }
            }});
  const std::uint32_t before = d.gpu(0).power_limit_mw();
  const std::uint32_t target = d.gpu(0).power_limit_constraints_mw().min_mw;
  const std::string target_text = std::to_string(target);
  Reply r = post(d, "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=" + target_text + "&block=true");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(json::parse(r.body), (json{{"errors", {{"0", "owner cannot be watched"}}}}));
  EXPECT_EQ(d.gpu(0).power_limit_mw(), before);
  refuse = false;
  r = post(d, "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=" + target_text + "&block=true");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(d.gpu(0).power_limit_mw(), target);
  std::unique_lock lock(mutex);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], "power_limit_mw=" + std::to_string(before) + "->" + target_text);

  lock.unlock();
  d.daemon().run_serialized(0, [&] { d.gpu(0).set_power_limit_mw(before); });
  EXPECT_EQ(d.gpu(0).power_limit_mw(), before);
  EXPECT_THROW(d.daemon().run_serialized(0, [] { throw Error(ErrorKind::kIo, "boom"); }), Error);
  EXPECT_THROW(d.daemon().run_serialized(9, [] {}), Error);
}

TEST(ZeusdTest, PowerLimitOutsideConstraintsChangesNothing) {
  Running d({});
  const std::uint32_t before0 = d.gpu(0).power_limit_mw();
  const auto c = d.gpu(0).power_limit_constraints_mw();
  for (const char* block : {"true", "false"}) {
    Reply r = post(
        d, "/gpu/set_power_limit?gpu_ids=0,1&power_limit_mw=10000&block=" + std::string(block));
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.content_type, "application/json");
    const std::string message =
        "Invalid request: Power limit 10000 mW is outside the valid range " +
        std::to_string(c.min_mw) + "-" + std::to_string(c.max_mw) + " mW";
    EXPECT_EQ(json::parse(r.body), (json{{"errors", {{"0", message}, {"1", message}}}})) << r.body;
  }
  EXPECT_EQ(d.gpu(0).power_limit_mw(), before0);
}

TEST(ZeusdTest, PersistenceMode) {
  Running d({});
  const bool before = d.gpu(1).persistence_mode();
  Reply r = post(d, std::string("/gpu/set_persistence_mode?gpu_ids=1&enabled=") +
                        (before ? "false" : "true") + "&block=true");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(d.gpu(1).persistence_mode(), !before);
  json persistence = json::parse(get(d, "/gpu/get_persistence_mode?gpu_ids=1").body);
  EXPECT_EQ(persistence["1"]["enabled"], !before);
}

TEST(ZeusdTest, QueryErrorsAreTextPlain) {
  Running d({});
  const std::uint32_t before = d.gpu(0).power_limit_mw();
  struct Case {
    std::string target;
    std::string body;
  };
  const std::vector<Case> cases = {
      {"/gpu/set_persistence_mode?gpu_ids=0&disabled=true&block=true",
       "Query deserialize error: unknown field `disabled`, expected one of `gpu_ids`, `enabled`, "
       "`block`"},
      {"/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000",
       "Query deserialize error: missing field `block`"},
      {"/gpu/set_persistence_mode?gpu_ids=0&enabled=1&block=true",
       "Query deserialize error: provided string was not `true` or `false`"},
      {"/gpu/set_power_limit?gpu_ids=0&power_limit_mw=-5&block=true",
       "Query deserialize error: invalid digit found in string"},
      {"/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000&block=True",
       "Query deserialize error: provided string was not `true` or `false`"},
      {"/gpu/set_power_limit?gpu_ids=0&power_limit_mw=99999999999&block=true",
       "Query deserialize error: number too large to fit in target type"},
      {"/gpu/set_power_limit?gpu_ids=5&power_limit_mw=300000&block=true",
       "GPU index 5 does not exist."},
      // Fields are checked before ids.
      {"/gpu/set_power_limit?gpu_ids=5&power_limit_mw=300000",
       "Query deserialize error: missing field `block`"},
      {"/gpu/set_power_limit?gpu_ids=0&gpu_ids=1&power_limit_mw=300000&block=true",
       "Query deserialize error: duplicate field `gpu_ids`"},
  };
  for (const Case& c : cases) {
    Reply r = post(d, c.target);
    EXPECT_EQ(r.status, 400) << c.target;
    EXPECT_EQ(r.content_type, "text/plain; charset=utf-8") << c.target;
    EXPECT_EQ(r.body, c.body) << c.target;
  }
  Reply r = get(d, "/gpu/get_power_limit?gpu_id=0");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, "Query deserialize error: unknown field `gpu_id`, expected `gpu_ids`");
  r = get(d, "/time?x=1");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(d.gpu(0).power_limit_mw(), before);
}

TEST(ZeusdTest, IdErrorsAreJson) {
  Running d({});
  struct Case {
    bool write;
    std::string target;
    std::string error;
  };
  const std::vector<Case> cases = {
      {true, "/gpu/set_power_limit?gpu_ids=&power_limit_mw=300000&block=true",
       "gpu_ids must contain at least one GPU index"},
      {true, "/gpu/set_power_limit?gpu_ids=0,,1&power_limit_mw=300000&block=true",
       "gpu_ids contains an empty GPU index"},
      {true, "/gpu/set_power_limit?gpu_ids=x&power_limit_mw=300000&block=true",
       "Invalid GPU index: x"},
      {false, "/gpu/get_power_limit?gpu_ids=5", "GPU 5 not found"},
      {false, "/gpu/get_power?gpu_ids=-1", "Invalid GPU index: -1"},
      {false, "/cpu/get_power?cpu_ids=7", "CPU 7 not found"},
      // Invalid UTF-8 in the client's text is replaced, never a 500 from the JSON writer.
      {false, "/gpu/get_power?gpu_ids=%ff", "Invalid GPU index: \xEF\xBF\xBD"},
  };
  for (const Case& c : cases) {
    Reply r = c.write ? post(d, c.target) : get(d, c.target);
    EXPECT_EQ(r.status, 400) << c.target;
    EXPECT_EQ(r.content_type, "application/json") << c.target;
    EXPECT_EQ(json::parse(r.body), (json{{"error", c.error}})) << c.target;
  }
}

TEST(ZeusdTest, CpuRoutes) {
  DaemonConfig config;
  config.cpu_power_poll_hz = 50;
  Running d(config);
  json energy =
      json::parse(get(d, "/cpu/get_cumulative_energy?cpu=true&dram=true&cpu_ids=0,1").body);
  EXPECT_TRUE(energy["0"]["cpu_energy_uj"].is_number_unsigned());
  EXPECT_TRUE(energy["0"]["dram_energy_uj"].is_number_unsigned());
  EXPECT_TRUE(energy["1"]["dram_energy_uj"].is_null());
  energy = json::parse(get(d, "/cpu/get_cumulative_energy?cpu=false&dram=true").body);
  EXPECT_TRUE(energy["0"]["cpu_energy_uj"].is_null());
  Reply r = get(d, "/cpu/get_cumulative_energy?cpu=true");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, "Query deserialize error: missing field `dram`");
  json power = json::parse(get(d, "/cpu/get_power?cpu_ids=0").body);
  EXPECT_GT(power["power_mw"]["0"]["cpu_mw"].get<std::uint32_t>(), 0u);
  EXPECT_TRUE(power["power_mw"]["0"]["dram_mw"].is_number());
  EXPECT_FALSE(power["power_mw"].contains("1"));
}

TEST(ZeusdTest, ReadOnlyServesNoControlRoute) {
  DaemonConfig config;
  config.read_only = true;
  Running d(config);
  const std::uint32_t before = d.gpu(0).power_limit_mw();
  Reply r = post(d, "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000&block=true");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body),
            (json{{"error", "API group 'gpu-control' is not enabled on this server."}}));
  EXPECT_EQ(d.gpu(0).power_limit_mw(), before);
  json body = json::parse(get(d, "/discover").body);
  EXPECT_EQ(body["enabled_api_groups"], json::parse(R"(["gpu-read","cpu-read"])"));
  EXPECT_EQ(body["gpus"].size(), 2u);
}

TEST(ZeusdTest, DisabledGroupsAndUnknownPaths) {
  DaemonConfig config;
  config.enabled_groups = {ApiGroup::kGpuControl};
  Running d(config);
  Reply r = get(d, "/cpu/get_power");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body),
            (json{{"error", "API group 'cpu-read' is not enabled on this server."}}));
  r = get(d, "/gpu/get_power");
  EXPECT_EQ(r.status, 404);
  json body = json::parse(get(d, "/discover").body);
  EXPECT_EQ(body["gpus"].size(), 2u);  // a GPU group is enabled
  EXPECT_EQ(body["cpus"].size(), 0u);
  r = get(d, "/auth/whoami");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body),
            (json{{"error", "Authentication is not enabled on this server."}}));
  r = get(d, "/no/such/route");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "");
}

TEST(ZeusdTest, AuthorizeHook) {
  DaemonConfig config;
  config.auth_required = true;
  Running d(config, 2, {.authorize = [](const std::string& path, const std::string& header) {
              AuthResult result;
              if (header.empty()) {
                result.allowed = false;
                result.status = 401;
                result.www_authenticate = true;
                result.error_message = "Authentication required.";
                return result;
              }
              result.subject = "alice";
              result.scopes = {"gpu-read"};
              result.expires_unix_s = 4102444800;
              if (path.rfind("/gpu/set_", 0) == 0) {
                result.allowed = false;
                result.status = 403;
                result.error_message = "lacks gpu-control";
              }
              return result;
            }});
  Reply r = get(d, "/gpu/get_power");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.www_authenticate, "Bearer realm=\"zeusd\"");
  EXPECT_EQ(get(d, "/discover").status, 200);  // never authenticated
  EXPECT_EQ(get(d, "/time").status, 200);
  EXPECT_EQ(json::parse(get(d, "/discover").body)["auth_required"], true);

  auto cli = d.client();
  cli.set_default_headers({{"Authorization", "Bearer t"}});
  auto res = cli.Get("/auth/whoami");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body),
            (json{{"sub", "alice"}, {"scopes", {"gpu-read"}}, {"exp", 4102444800}}));
  res = cli.Post("/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000&block=true");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  res = cli.Get("/gpu/get_power");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(ZeusdTest, ParseApiGroups) {
  EXPECT_EQ(parse_api_group_list("gpu-read,cpu-read,gpu-read"),
            (std::vector<ApiGroup>{ApiGroup::kGpuRead, ApiGroup::kCpuRead}));
  EXPECT_THROW(parse_api_group_list("gpu-read,gpu-write"), Error);
  EXPECT_THROW(parse_api_group_list(""), Error);
}

// Reads SSE events until `count` arrived; returns them parsed.
std::vector<json> read_events(const Running& d, const std::string& target, std::size_t count,
                              int* status = nullptr, std::string* content_type = nullptr);

std::vector<json> read_events(httplib::Client& cli, const std::string& target, std::size_t count,
                              int* status = nullptr, std::string* content_type = nullptr) {
  std::string buffer;
  std::vector<json> events;
  auto res = cli.Get(
      target.c_str(),
      [&](const httplib::Response& response) {
        if (status) {
          *status = response.status;
        }
        if (content_type) {
          *content_type = response.get_header_value("Content-Type");
        }
        return true;
      },
      [&](const char* data, std::size_t length) {
        buffer.append(data, length);
        std::size_t end = 0;
        while ((end = buffer.find("\n\n")) != std::string::npos) {
          const std::string event = buffer.substr(0, end);
          buffer.erase(0, end + 2);
          if (event.rfind("data: ", 0) == 0) {
            events.push_back(json::parse(event.substr(6)));
          }
        }
        return events.size() < count;
      });
  return events;
}

std::vector<json> read_events(const Running& d, const std::string& target, std::size_t count,
                              int* status, std::string* content_type) {
  auto cli = d.client();
  return read_events(cli, target, count, status, content_type);
}

TEST(ZeusdTest, GpuPowerStreamSendsCurrentValuesFirst) {
  Running d({}, 3);
  int status = 0;
  std::string content_type;
  auto events = read_events(d, "/gpu/stream_power?gpu_ids=2,0", 2, &status, &content_type);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(content_type, "text/event-stream");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["gpu_id"], 0);
  EXPECT_EQ(events[1]["gpu_id"], 2);
  EXPECT_EQ(events[0]["power_mw"], d.gpu(0).instant_power_mw());
  EXPECT_TRUE(events[0]["timestamp_ms"].is_number());

  Reply r = get(d, "/gpu/stream_power?gpu_ids=1,5,7");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body),
            (json{{"error", "Unknown GPU indices: [5, 7]. Available: [0, 1, 2]"}}));
}

TEST(ZeusdTest, CpuPowerStream) {
  DaemonConfig config;
  config.cpu_power_poll_hz = 100;
  Running d(config);
  auto events = read_events(d, "/cpu/stream_power", 4);
  ASSERT_EQ(events.size(), 4u);
  for (const json& event : events) {
    EXPECT_TRUE(event.contains("timestamp_ms"));
    EXPECT_GT(event["cpu_mw"].get<std::uint32_t>(), 0u);
    EXPECT_EQ(event["dram_mw"].is_null(), event["cpu_id"] == 1) << event;
  }
}

TEST(ZeusdTest, StopEndsOpenStreams) {
  auto d = std::make_unique<Running>(DaemonConfig{});
  auto cli = d->client();
  std::thread reader([&cli] { read_events(cli, "/gpu/stream_power", 1000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  d.reset();  // stop() + join
  reader.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

}  // namespace
}  // namespace zeus::daemon
