// Load test of the batch-size-optimizer server on loopback: trial cycles per second (get a
// batch size + one report + end the trial) and per-request p50/p99 latency with 1, 8 and 32
// concurrent clients, on SQLite and PostgreSQL, next to the same HTTP stack answering a no-op
// route (the ceiling). A load generator, not a Google Benchmark: each configuration runs for a
// fixed time with real concurrent clients.
//
//   zeus_bso_server_bench [--seconds 3] [--clients 1,8,32] [--store sqlite|postgres|both]
//                         [--connections new|keepalive]
//
// --connections new (the default) opens one connection per request, as the reference's Python
// client does; keepalive reuses one per client.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bso_cycle.hpp"
#include "server/postgres_fixture.hpp"
#include "server/server_harness.hpp"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Result {
  double cycles_per_s = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  long errors = 0;
};

double percentile(std::vector<double>& values, double p) {
  if (values.empty()) {
    return 0;
  }
  const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1));
  std::nth_element(values.begin(), values.begin() + static_cast<long>(index), values.end());
  return values[index];
}

// `noop`: the three requests of a cycle go to /_noop instead.
Result run(const zeus::test::ServerHarness& server, int clients, double seconds, bool noop,
           bool keepalive, int round) {
  std::vector<std::string> jobs;
  for (int c = 0; c < clients; ++c) {
    jobs.push_back("peer-bench-" + std::to_string(round) + "-" + std::to_string(c));
    auto spec = zeus::test::peer_job_spec(jobs.back());
    server.request("POST", "/jobs", spec.dump());
  }
  std::atomic<bool> stop{false};
  std::atomic<long> cycles{0};
  std::atomic<long> errors{0};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto& mine = latencies[static_cast<std::size_t>(c)];
      const std::string& job = jobs[static_cast<std::size_t>(c)];
      std::unique_ptr<httplib::Client> shared;
      auto client = [&]() -> httplib::Client& {
        if (!keepalive || !shared) {
          shared = std::make_unique<httplib::Client>("127.0.0.1", server.port());
          shared->set_keep_alive(keepalive);
          shared->set_tcp_nodelay(true);
        }
        return *shared;
      };
      auto timed = [&](auto&& call) {
        const auto start = Clock::now();
        auto res = call();
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        if (!res || res->status != 200) {
          ++errors;
        }
        return res;
      };
      for (int i = 0; !stop; ++i) {
        if (noop) {
          timed([&] { return client().Get("/_noop"); });
          timed([&] { return client().Post("/_noop", "{}", ""); });
          timed([&] { return client().Patch("/_noop", "{}", ""); });
        } else {
          auto got =
              timed([&] { return client().Get(("/jobs/batch_size?job_id=" + job).c_str()); });
          if (!got || got->status != 200) {
            continue;
          }
          const json trial = json::parse(got->body);
          const json report = zeus::bench::synthetic_report(trial, i);
          timed([&] { return client().Post("/report", report.dump(), ""); });
          timed([&] { return client().Patch("/trials", trial.dump(), ""); });
        }
        ++cycles;
      }
    });
  }
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (std::thread& thread : threads) {
    thread.join();
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (auto& mine : latencies) {
    all.insert(all.end(), mine.begin(), mine.end());
  }
  Result result;
  result.cycles_per_s = static_cast<double>(cycles) / elapsed;
  result.p50_ms = percentile(all, 0.50);
  result.p99_ms = percentile(all, 0.99);
  result.errors = errors;
  return result;
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    values.push_back(std::stoi(text.substr(start, comma - start)));
    if (comma == std::string::npos) {
      break;
    }
    start = comma + 1;
  }
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3;
  std::vector<int> clients = {1, 8, 32};
  std::string stores = "both";
  bool keepalive = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--seconds") {
      seconds = std::stod(value);
    } else if (flag == "--clients") {
      clients = parse_list(value);
    } else if (flag == "--store") {
      stores = value;
    } else if (flag == "--connections") {
      keepalive = value == "keepalive";
    } else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  zeus::server::HttpServerOptions options;
  options.noop_route = true;
  if (const char* threads = std::getenv("ZEUS_BENCH_THREADS")) {
    options.threads = std::atoi(threads);
  }

  std::unique_ptr<zeus::test::PostgresServer> postgres;
  std::vector<std::pair<std::string, std::string>> targets;  // name, db url ("" = SQLite temp)
  if (stores == "sqlite" || stores == "both") {
    targets.emplace_back("sqlite", "");
  }
  if (stores == "postgres" || stores == "both") {
    std::string why;
    postgres = zeus::test::PostgresServer::start_or_skip_reason(why);
    if (postgres) {
      postgres->create_database("bso_bench");
      targets.emplace_back("postgres", postgres->url("bso_bench"));
    } else {
      std::cerr << "PostgreSQL skipped: " << why << "\n";
    }
  }
  std::cout << "connections: " << (keepalive ? "keep-alive" : "one per request")
            << ", seconds per row: " << seconds
            << ", cores: " << std::thread::hardware_concurrency() << "\n";
  std::cout << "store     clients  cycles/s  ceiling/s  ratio  p50 ms  p99 ms  ceiling p50/p99 ms  "
               "errors\n";
  int round = 0;
  for (const auto& [name, url] : targets) {
    zeus::test::ServerHarness server(url, options);
    for (const int count : clients) {
      const Result ceiling = run(server, count, seconds, true, keepalive, round++);
      const Result real = run(server, count, seconds, false, keepalive, round++);
      std::printf("%-9s %7d  %8.0f  %9.0f  %5.2f  %6.2f  %6.2f  %8.2f / %6.2f  %ld\n", name.c_str(),
                  count, real.cycles_per_s, ceiling.cycles_per_s,
                  real.cycles_per_s / ceiling.cycles_per_s, real.p50_ms, real.p99_ms,
                  ceiling.p50_ms, ceiling.p99_ms, real.errors + ceiling.errors);
      std::fflush(stdout);
    }
  }
  return 0;
}
