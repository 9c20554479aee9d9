// What a BSO trial cycle costs on PostgreSQL next to SQLite, and whether more server processes
// on one PostgreSQL serve more (issue 27). Not a Google Benchmark: two measurements, ratios taken
// within one run.
//
// 1. CPU per trial cycle (dispatch, report, end), the service in-process without HTTP, one
//    thread: the server's own CPU (this thread's) and, on PostgreSQL, that of its backends
//    (the postmaster's children, from /proc). SQLite's includes its database work.
// 2. N server processes (fork()ed, each its own HTTP server, store and pool) on one PostgreSQL,
//    the same client load (C clients, each its own job, every request to the next server in
//    turn, so that consecutive requests for a job go to different processes): cycles per second
//    with 1 server against N.
//
//   zeus_bso_store_cost_bench [--cycles 2000] [--servers 4] [--clients 8] [--seconds 4]
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bso_cycle.hpp"
#include "server/postgres_fixture.hpp"
#include "server/server_harness.hpp"
#include "server/service.hpp"
#include "support/temp_dir.hpp"

namespace {

using nlohmann::json;

double thread_cpu_s() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// CPU seconds (user + system) of the processes whose parent is `parent`.
double children_cpu_s(int parent) {
  double total = 0;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::ifstream in(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close == std::string::npos) {
      continue;
    }
    std::istringstream fields(text.substr(close + 2));
    std::string state;
    long ppid = 0;
    fields >> state >> ppid;
    if (ppid != parent) {
      continue;
    }
    std::string skip;
    for (int i = 0; i < 9; ++i) {
      fields >> skip;  // pgrp .. cmajflt
    }
    double utime = 0;
    double stime = 0;
    fields >> utime >> stime;
    total += (utime + stime) / tick;
  }
  return total;
}

zeus::bso::JobSpec job_spec(const std::string& id) {
  zeus::bso::JobSpec spec;
  spec.job_id = id;
  spec.job_id_prefix = "cost";
  spec.max_power_w = 700.0;
  spec.number_of_gpus = 1;
  spec.gpu_model = "h100";
  spec.batch_sizes = {16, 32, 64, 128, 256, 512, 1024};
  spec.default_batch_size = 128;
  spec.mab_seed = 1;
  return spec;
}

struct Cost {
  double server_us = 0;   // this thread's CPU per cycle
  double backend_us = 0;  // PostgreSQL's backends' CPU per cycle
  double wall_us = 0;
};

Cost cycle_cost(zeus::server::Store& store, int cycles, int postmaster, const std::string& job) {
  zeus::server::BsoService service(store);
  service.register_job(job_spec(job));
  const auto run = [&](int count) {
    for (int i = 0; i < count; ++i) {
      zeus::bench::trial_cycle(service, job, i);
    }
  };
  run(50);  // through pruning, into the bandit
  const double backend0 = postmaster > 0 ? children_cpu_s(postmaster) : 0;
  const double cpu0 = thread_cpu_s();
  const auto wall0 = std::chrono::steady_clock::now();
  run(cycles);
  Cost cost;
  cost.server_us = (thread_cpu_s() - cpu0) * 1e6 / cycles;
  cost.backend_us = postmaster > 0 ? (children_cpu_s(postmaster) - backend0) * 1e6 / cycles : 0.0;
  cost.wall_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - wall0).count() /
      cycles;
  return cost;
}

// A server process on `url`; its port comes back through a pipe.
struct Child {
  pid_t pid = -1;
  int port = 0;
};
Child spawn_server(const std::string& url) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("pipe");
    std::exit(1);
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    zeus::test::ServerHarness server(url);
    const int port = server.port();
    if (write(fds[1], &port, sizeof port) != sizeof port) {
      _exit(1);
    }
    close(fds[1]);
    pause();  // until SIGKILL
    _exit(0);
  }
  close(fds[1]);
  Child child{pid, 0};
  if (read(fds[0], &child.port, sizeof child.port) != sizeof child.port) {
    std::cerr << "a server process did not start\n";
    std::exit(1);
  }
  close(fds[0]);
  return child;
}

// `sticky`: each client keeps to one server; otherwise every request goes to the next one.
double cycles_per_s(const std::vector<int>& ports, int clients, double seconds, int round,
                    bool sticky) {
  std::atomic<bool> stop{false};
  std::atomic<long> cycles{0};
  std::atomic<long> errors{0};
  std::vector<std::string> jobs;
  for (int c = 0; c < clients; ++c) {
    jobs.push_back("peer-load-" + std::to_string(round) + "-" + std::to_string(c));
    httplib::Client client("127.0.0.1", ports.front());
    const auto registered = client.Post("/jobs", zeus::test::peer_job_spec(jobs.back()).dump(), "");
    if (!registered || registered->status != 201) {
      std::cout << "  registering failed: "
                << (registered ? std::to_string(registered->status) + " " + registered->body
                               : httplib::to_string(registered.error()))
                << "\n";
    }
  }
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::size_t next = static_cast<std::size_t>(c);
      const auto client = [&]() {
        const std::size_t server = sticky ? static_cast<std::size_t>(c) : next++;
        auto made = std::make_unique<httplib::Client>("127.0.0.1", ports[server % ports.size()]);
        made->set_tcp_nodelay(true);
        return made;
      };
      const std::string& job = jobs[static_cast<std::size_t>(c)];
      for (int i = 0; !stop; ++i) {
        auto got = client()->Get(("/jobs/batch_size?job_id=" + job).c_str());
        if (!got || got->status != 200) {
          if (errors++ == 0) {
            std::cout << "  first failure: "
                      << (got ? std::to_string(got->status) + " " + got->body
                              : httplib::to_string(got.error()))
                      << "\n";
          }
          continue;
        }
        const json trial = json::parse(got->body);
        const json report = zeus::bench::synthetic_report(trial, i);
        auto reported = client()->Post("/report", report.dump(), "");
        auto ended = client()->Patch("/trials", trial.dump(), "");
        if (!reported || reported->status != 200 || !ended || ended->status != 200) {
          ++errors;
        }
        ++cycles;
      }
    });
  }
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (std::thread& thread : threads) {
    thread.join();
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (errors > 0) {
    std::cout << "  (" << errors << " failed requests)\n";
  }
  return static_cast<double>(cycles) / elapsed;
}

int postmaster_pid(const zeus::test::PostgresServer& postgres) {
  std::ifstream in(postgres.directory() / "data" / "postmaster.pid");
  int pid = 0;
  in >> pid;
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  int cycles = 2000;
  int servers = 4;
  int clients = 8;
  double seconds = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--cycles") {
      cycles = std::stoi(value);
    } else if (flag == "--servers") {
      servers = std::stoi(value);
    } else if (flag == "--clients") {
      clients = std::stoi(value);
    } else if (flag == "--seconds") {
      seconds = std::stod(value);
    } else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  std::string why;
  const auto postgres = zeus::test::PostgresServer::start_or_skip_reason(why);
  if (!postgres) {
    std::cerr << "PostgreSQL not available: " << why << "\n";
    return 0;
  }
  postgres->create_database("bso_cost");
  const std::string url = postgres->url("bso_cost");
  const int postmaster = postmaster_pid(*postgres);
  // The same database over the server's Unix socket instead of loopback TCP.
  const std::string socket_url =
      "postgresql://postgres@/bso_cost?host=" + postgres->directory().string() +
      "&port=" + std::to_string(postgres->port());
  zeus::testing::TempDir dir;

  std::cout << "1. CPU per trial cycle (service in-process, one thread, " << cycles
            << " cycles, 3 rounds alternating)\n";
  std::cout << "round  sqlite cpu us  postgres cpu us  ratio  postgres backend cpu us  "
               "sqlite wall us  postgres wall us  unix socket cpu us  ratio\n";
  for (int round = 0; round < 3; ++round) {
    const auto sqlite = zeus::server::open_store(
        "sqlite:///" + (dir.path() / ("cost" + std::to_string(round) + ".db")).string());
    const Cost lite = cycle_cost(*sqlite, cycles, 0, "cost-sqlite-" + std::to_string(round));
    const auto pg = zeus::server::open_store(url);
    const Cost post = cycle_cost(*pg, cycles, postmaster, "cost-pg-" + std::to_string(round));
    const auto local = zeus::server::open_store(socket_url);
    const Cost unix_socket =
        cycle_cost(*local, cycles, postmaster, "cost-pgunix-" + std::to_string(round));
    std::printf("%5d  %13.1f  %15.1f  %5.2f  %23.1f  %14.1f  %16.1f  %19.1f  %5.2f\n", round,
                lite.server_us, post.server_us, post.server_us / lite.server_us, post.backend_us,
                lite.wall_us, post.wall_us, unix_socket.server_us,
                unix_socket.server_us / lite.server_us);
    std::fflush(stdout);
  }

  std::cout << "\n2. server processes on one PostgreSQL, " << clients << " clients, " << seconds
            << " s per row, requests spread over the servers in turn\n";
  std::cout << "round  1 server cycles/s  " << servers << " servers cycles/s  ratio  " << servers
            << " servers, each client keeping to one: cycles/s  ratio\n";
  int load_round = 0;
  for (int round = 0; round < 2; ++round) {
    double rates[3] = {0, 0, 0};
    for (int variant = 0; variant < 3; ++variant) {
      const int count = variant == 0 ? 1 : servers;
      std::vector<Child> children;
      std::vector<int> ports;
      for (int s = 0; s < count; ++s) {
        children.push_back(spawn_server(url));
        ports.push_back(children.back().port);
      }
      rates[variant] = cycles_per_s(ports, clients, seconds, load_round++, variant == 2);
      for (const Child& child : children) {
        kill(child.pid, SIGKILL);
        waitpid(child.pid, nullptr, 0);
      }
    }
    std::printf("%5d  %17.0f  %18.0f  %5.2f  %46.0f  %5.2f\n", round, rates[0], rates[1],
                rates[1] / rates[0], rates[2], rates[2] / rates[0]);
    std::fflush(stdout);
  }
  return 0;
}
