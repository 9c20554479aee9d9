// `zeus bso serve` as a process: graceful SIGTERM, and SIGKILL under load followed by a restart
// on the same database, after which every report the server acknowledged is there.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "server/server_harness.hpp"
#include "support/sanitizers.hpp"

namespace {

using nlohmann::json;

// A running `zeus bso serve`, its output in a file.
class ServerProcess {
 public:
  ServerProcess(const std::filesystem::path& dir, const std::string& db_url,
                std::vector<std::string> extra = {}) {
    port_file_ = dir / ("port-" + std::to_string(++count_));
    log_ = dir / ("log-" + std::to_string(count_));
    std::vector<std::string> args = {ZEUS_CLI_PATH, "bso",         "serve",
                                     "--db",        db_url,        "--port",
                                     "0",           "--port-file", port_file_.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& arg : args) {
        argv.push_back(arg.data());
      }
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 1000 && port_ == 0; ++i) {
      std::ifstream in(port_file_);
      if (!(in >> port_)) {
        port_ = 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    if (port_ == 0) {
      ADD_FAILURE() << "the server did not start: " << log();
    }
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Sends the signal and returns the wait status.
  int signal_and_wait(int signal_number) {
    kill(pid_, signal_number);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  int port() const { return port_; }
  // Resident memory (VmRSS), in KiB.
  long rss_kib() const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("VmRSS:", 0) == 0) {
        return std::stol(line.substr(6));
      }
    }
    return -1;
  }
  std::string log() const {
    std::ifstream in(log_);
    return {std::istreambuf_iterator<char>(in), {}};
  }

 private:
  static inline int count_ = 0;
  std::filesystem::path port_file_;
  std::filesystem::path log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

TEST(BsoProcess, SigtermStopsGracefully) {
  const auto dir = zeus::test::make_temp_dir("zeus-bso-process");
  ServerProcess server(dir, "sqlite:///" + (dir / "bso.db").string());
  httplib::Client client("127.0.0.1", server.port());
  ASSERT_EQ(client.Get("/healthz")->status, 200);
  const int status = server.signal_and_wait(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << server.log();
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(server.log().find("stopped after"), std::string::npos) << server.log();
  std::filesystem::remove_all(dir);
}

TEST(BsoProcess, NoAcknowledgedReportIsLostToSigkill) {
  const auto dir = zeus::test::make_temp_dir("zeus-bso-kill");
  const std::string url = "sqlite:///" + (dir / "bso.db").string();
  std::mutex mutex;
  std::map<std::string, std::map<int, double>> acknowledged;  // job -> trial -> time reported
  {
    ServerProcess server(dir, url);
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int c = 0; c < 8; ++c) {
      clients.emplace_back([&, c] {
        const std::string job = "peer-kill-" + std::to_string(c);
        httplib::Client http("127.0.0.1", server.port());
        http.set_connection_timeout(1, 0);
        http.set_read_timeout(2, 0);
        auto reg = http.Post("/jobs", zeus::test::peer_job_spec(job).dump(), "");
        if (!reg || reg->status != 201) {
          return;
        }
        for (int cycle = 0; !stop; ++cycle) {
          auto got = http.Get(("/jobs/batch_size?job_id=" + job).c_str());
          if (!got || got->status != 200) {
            return;  // the server is gone
          }
          json report = json::parse(got->body);
          report["time"] = 50.0 + cycle;
          report["energy"] = 20000.0;
          report["metric"] = 0.95;
          report["current_epoch"] = 1;
          auto res = http.Post("/report", report.dump(), "");
          if (!res || res->status != 200) {
            return;
          }
          std::lock_guard lock(mutex);
          acknowledged[job][report.at("trial_number").get<int>()] = 50.0 + cycle;
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    const int status = server.signal_and_wait(SIGKILL);
    EXPECT_TRUE(WIFSIGNALED(status));
    stop = true;
    for (std::thread& client : clients) {
      client.join();
    }
  }
  std::size_t total = 0;
  for (const auto& [job, trials] : acknowledged) {
    total += trials.size();
  }
  ASSERT_GT(total, 20u) << "too little load to test anything";
  // Restart on the same database: every acknowledged report is there, with its values.
  ServerProcess restarted(dir, url);
  httplib::Client http("127.0.0.1", restarted.port());
  for (const auto& [job, trials] : acknowledged) {
    auto res = http.Get(("/jobs/" + job).c_str());
    ASSERT_EQ(res->status, 200) << res->body;
    std::map<int, json> stored;
    const json state = json::parse(res->body);
    for (const json& trial : state.at("trials")) {
      stored[trial.at("trial_number").get<int>()] = trial;
    }
    for (const auto& [number, time_s] : trials) {
      ASSERT_EQ(stored.count(number), 1u) << job << " trial " << number << " lost: " << res->body;
      EXPECT_EQ(stored[number].at("status"), "Succeeded");
      EXPECT_EQ(stored[number].at("time").get<double>(), time_s);
    }
    // And the job goes on from where it was.
    EXPECT_EQ(http.Get(("/jobs/batch_size?job_id=" + job).c_str())->status, 200);
  }
  std::cout << "acknowledged reports checked after SIGKILL: " << total << "\n";
  std::filesystem::remove_all(dir);
}

// Runs `zeus bso serve ARGS` (killed after 20 s: a server that starts is a failure here) and
// returns its exit code and output.
std::pair<int, std::string> run_serve(const std::string& args) {
  const std::string command =
      std::string("timeout -s KILL 20 ") + ZEUS_CLI_PATH + " bso serve " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    out += buffer;
  }
  const int status = pclose(pipe);
  return {WEXITSTATUS(status), out};
}

TEST(BsoProcess, BadStartupsFailWithAClearMessage) {
  const auto dir = zeus::test::make_temp_dir("zeus-bso-bad");
  const std::string cli = ZEUS_CLI_PATH;
  auto run = [&](const std::string& args) {
    const std::string command = cli + " bso serve " + args + " 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    std::string out;
    char buffer[512];
    while (fgets(buffer, sizeof(buffer), pipe) != nullptr) {
      out += buffer;
    }
    const int status = pclose(pipe);
    return std::make_pair(WEXITSTATUS(status), out);
  };
  auto [code, out] = run("--db mysql://x/y --port 0");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("unknown database URL"), std::string::npos) << out;
  std::tie(code, out) = run("--db sqlite:////nonexistent-dir/x/bso.db --port 0");
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("cannot open the SQLite database"), std::string::npos) << out;
  std::tie(code, out) = run("--db postgresql://nobody@127.0.0.1:1/none --port 0");
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("127.0.0.1"), std::string::npos) << out;
  std::tie(code, out) = run("--token-file " + (dir / "missing").string() + " --port 0");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--token-file"), std::string::npos) << out;
  std::tie(code, out) = run("--db 'sqlite:///x.db?journal=off' --port 0");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("unknown SQLite URL parameter"), std::string::npos) << out;
  // A second server on an SQLite file that a running one owns.
  ServerProcess owner(dir, "sqlite:///" + (dir / "owned.db").string());
  std::tie(code, out) = run("--db sqlite:///" + (dir / "owned.db").string() + " --port 0");
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("in use by another process"), std::string::npos) << out;
  // The port is taken.
  ServerProcess server(dir, "sqlite:///" + (dir / "a.db").string());
  std::tie(code, out) =
      run("--db sqlite:///" + (dir / "b.db").string() + " --port " + std::to_string(server.port()));
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("cannot listen"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

TEST(BsoProcess, ABlockedDatabaseGets503AndTheServerKeepsServing) {
  const auto dir = zeus::test::make_temp_dir("zeus-bso-ro");
  const std::string path = (dir / "bso.db").string();
  {
    // Create and migrate it, register a job.
    zeus::test::ServerHarness seed("sqlite:///" + path);
    ASSERT_EQ(seed.request("POST", "/jobs", zeus::test::peer_job_spec("peer-ro").dump())->status,
              201);
  }
  // Shared locking, so that another process can take the database's lock at all.
  ServerProcess server(dir, "sqlite:///" + path + "?locking=shared");
  httplib::Client http("127.0.0.1", server.port());
  // Another process holds the database's write lock (as a stuck writer or a read-only mount
  // would refuse writes): the server answers 503 after its busy timeout, and serves again once
  // the lock is gone.
  zeus::test::ServerHarness holder("sqlite:///" + path + "?locking=shared");
  std::atomic<bool> release{false};
  std::thread lock_holder([&] {
    holder.store().transact([&](zeus::server::StoreTransaction& tx) {
      tx.lock_job("peer-ro");
      while (!release) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  http.set_read_timeout(30, 0);
  auto res = http.Get("/jobs/batch_size?job_id=peer-ro");
  EXPECT_EQ(res->status, 503) << res->body;
  EXPECT_NE(res->body.find("busy"), std::string::npos) << res->body;
  release = true;
  lock_holder.join();
  EXPECT_EQ(http.Get("/jobs/batch_size?job_id=peer-ro")->status, 200);
  EXPECT_EQ(http.Get("/healthz")->status, 200);
  std::filesystem::remove_all(dir);
}

TEST(BsoProcess, BodyLimitsOutsideOneByteToOneGibAreRefused) {
  const auto dir = zeus::test::make_temp_dir("zeus-bso-limits");
  const std::string db = " --db sqlite:///" + (dir / "bso.db").string() + " --port 0";
  for (const char* value : {"-1", "0", "1073741825", "99999999999999"}) {
    const auto [code, out] = run_serve(std::string("--max-body-bytes ") + value + db);
    EXPECT_EQ(code, 2) << value << ": " << out;
    EXPECT_NE(out.find("--max-body-bytes must be between 1 and 1073741824"), std::string::npos)
        << out;
  }
  // The bounds themselves are fine.
  ServerProcess small(dir, "sqlite:///" + (dir / "a.db").string(), {"--max-body-bytes", "1"});
  EXPECT_EQ(httplib::Client("127.0.0.1", small.port()).Get("/healthz")->status, 200);
  ServerProcess large(dir, "sqlite:///" + (dir / "b.db").string(),
                      {"--max-body-bytes", "1073741824"});
  EXPECT_EQ(httplib::Client("127.0.0.1", large.port()).Get("/healthz")->status, 200);
  std::filesystem::remove_all(dir);
}

TEST(BsoProcess, TokenFilesThatAreNotRegularFilesAreRefused) {
  const auto dir = zeus::test::make_temp_dir("zeus-bso-token");
  const std::string db = " --db sqlite:///" + (dir / "bso.db").string() + " --port 0";
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/zero", "is a device"}, {fifo, "is a FIFO"}, {dir.string(), "is a directory"}};
  for (const auto& [path, kind] : cases) {
    const auto started = std::chrono::steady_clock::now();
    const auto [code, out] = run_serve("--token-file " + path + db);
    EXPECT_EQ(code, 2) << path << ": " << out;
    EXPECT_NE(out.find("--token-file " + path + " " + kind), std::string::npos) << out;
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10)) << path;
  }
  // A first line longer than 4096 bytes is refused without reading the rest.
  const auto long_line = dir / "long";
  std::ofstream(long_line) << std::string(5000, 'a') << "\n";
  auto [code, out] = run_serve("--token-file " + long_line.string() + db);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("longer than 4096 bytes"), std::string::npos) << out;
  // A token on the first line of a large file is read.
  const auto good = dir / "token";
  {
    std::ofstream file(good);
    file << "0123456789abcdef-process-token\n" << std::string(1 << 20, '#') << "\n";
  }
  ServerProcess server(dir, "sqlite:///" + (dir / "a.db").string(),
                       {"--token-file", good.string()});
  httplib::Client client("127.0.0.1", server.port());
  EXPECT_EQ(client.Get("/jobs")->status, 401);
  client.set_bearer_token_auth("0123456789abcdef-process-token");
  EXPECT_EQ(client.Get("/jobs")->status, 200);
  std::filesystem::remove_all(dir);
}

TEST(BsoProcess, ACorruptSqliteFileIsRefusedAtStartUnlessTheCheckIsSkipped) {
  const auto dir = zeus::test::make_temp_dir("zeus-bso-corrupt");
  const auto file = dir / "bso.db";
  {
    zeus::test::ServerHarness seed("sqlite:///" + file.string());
    ASSERT_EQ(seed.request("POST", "/jobs", zeus::test::peer_job_spec("peer-c").dump())->status,
              201);
  }
  // Garbage over the last page, which holds job rows or their index.
  const auto size = std::filesystem::file_size(file);
  ASSERT_GE(size, 8192u);
  {
    std::fstream out(file, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(static_cast<std::streamoff>(size - 4096));
    const std::string garbage(4096, '\xAB');
    out.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  const auto [code, out] = run_serve("--db sqlite:///" + file.string() + " --port 0");
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("\"" + file.string() + "\" is corrupt"), std::string::npos) << out;
  EXPECT_NE(out.find(".recover"), std::string::npos) << out;
  EXPECT_NE(out.find("--skip-integrity-check"), std::string::npos) << out;
  // Skipped: it serves (the damaged page holds no row that the health check reads).
  ServerProcess server(dir, "sqlite:///" + file.string(), {"--skip-integrity-check"});
  httplib::Client http("127.0.0.1", server.port());
  EXPECT_EQ(http.Get("/healthz")->status, 200);
  std::filesystem::remove_all(dir);
}

}  // namespace

namespace {

// `--policy` sets the policy of jobs that name none; a job keeps its policy across a restart
// with another default (the state is restored from the database by a new process).
TEST(BsoProcess, PolicyIsTheDefaultOfNewJobsAndSurvivesARestart) {
  const auto dir = zeus::test::make_temp_dir("zeus-bso-policy");
  const std::string url = "sqlite:///" + (dir / "bso.db").string();
  const std::string body = zeus::test::peer_job_spec("peer-lr").dump();
  std::string first_dispatch;
  {
    ServerProcess server(dir, url, {"--policy", "low-regret"});
    httplib::Client http("127.0.0.1", server.port());
    auto reg = http.Post("/jobs", body, "");
    ASSERT_EQ(reg->status, 201) << reg->body;
    EXPECT_EQ(json::parse(reg->body).at("policy"), "low-regret");
    auto got = http.Get("/jobs/batch_size?job_id=peer-lr");
    ASSERT_EQ(got->status, 200) << got->body;
    json report = json::parse(got->body);
    report["time"] = 80.0;
    report["energy"] = 32000.0;
    report["metric"] = 0.95;
    report["current_epoch"] = 10;
    ASSERT_EQ(http.Post("/report", report.dump(), "")->status, 200);
    EXPECT_EQ(server.signal_and_wait(SIGTERM), 0);
    EXPECT_NE(server.log().find("default policy low-regret"), std::string::npos) << server.log();
  }
  ServerProcess server(dir, url);  // default policy zeus
  httplib::Client http("127.0.0.1", server.port());
  auto reg = http.Post("/jobs", body, "");
  ASSERT_EQ(reg->status, 200) << reg->body;
  EXPECT_EQ(json::parse(reg->body).at("policy"), "low-regret");
  auto got = http.Get("/jobs/batch_size?job_id=peer-lr");
  ASSERT_EQ(got->status, 200) << got->body;
  EXPECT_EQ(json::parse(got->body).at("trial_number"), 2);
  const json state = json::parse(http.Get("/jobs/peer-lr")->body);
  EXPECT_EQ(state.at("spec").at("policy"), "low-regret");
  EXPECT_EQ(state.at("min_cost"), 0.5 * 32000.0 + 0.5 * 700.0 * 80.0);
  // New jobs get this server's default.
  auto other = http.Post("/jobs", zeus::test::peer_job_spec("peer-z").dump(), "");
  ASSERT_EQ(other->status, 201) << other->body;
  // A job on the paper's policy is answered without "policy", as the reference answers.
  EXPECT_FALSE(json::parse(other->body).contains("policy"));
  std::filesystem::remove_all(dir);
}

TEST(BsoProcess, AnUnknownPolicyIsRefusedBeforeTheDatabaseIsOpened) {
  const auto dir = zeus::test::make_temp_dir("zeus-bso-bad-policy");
  const auto db = dir / "bso.db";
  const auto [code, out] =
      run_serve("--db sqlite:///" + db.string() + " --port 0 --policy thompson");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("--policy"), std::string::npos) << out;
  EXPECT_NE(out.find("low-regret"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(db));
  std::filesystem::remove_all(dir);
}

// Large answers must not leave the server's memory high for good (issue 27, item 7: 16 -> 600 MB
// after 40 job-state answers of a 20,000-trial job, from many worker threads' arenas). A job's
// trials now come in pages; the job is read whole, page by page, by 10 clients at once.
TEST(BsoProcess, MemoryAfterManyLargeAnswersStaysNearItsLevelBefore) {
  if (zeus::testing::kSanitized) {
    GTEST_SKIP() << zeus::testing::kMeasuredInReleaseOnly;
  }
  const auto dir = zeus::test::make_temp_dir("zeus-bso-rss");
  const std::string url = "sqlite:///" + (dir / "bso.db").string();
  {
    auto store = zeus::server::open_store(url);
    zeus::server::BsoService service(*store);
    service.register_job(zeus::bso::job_spec_from_json(zeus::test::peer_job_spec("peer-big")));
    store->transact([](zeus::server::StoreTransaction& tx) {
      for (int i = 1; i <= 20000; ++i) {
        zeus::server::TrialRecord trial;
        trial.job_id = "peer-big";
        trial.trial_number = i;
        trial.batch_size = 128;
        trial.type = "Exploration";
        trial.status = "Failed";
        trial.start_ms = i;
        trial.end_ms = i + 1;
        tx.insert_trial(trial);
      }
    });
  }
  ServerProcess server(dir, url);
  // The whole job, page by page (1,000 trials, about 176 KB, a page): 3.5 MB of answers.
  const auto fetch = [&] {
    httplib::Client http("127.0.0.1", server.port());
    http.set_read_timeout(30, 0);
    std::size_t bytes = 0;
    std::string after = "0";
    for (int page = 0; page < 25 && !after.empty(); ++page) {
      const auto got = http.Get("/jobs/peer-big?trials_after=" + after);
      ASSERT_TRUE(got);
      ASSERT_EQ(got->status, 200);
      bytes += got->body.size();
      const json body = json::parse(got->body);
      after = body.contains("trials_next") ? std::to_string(body.at("trials_next").get<int>()) : "";
    }
    ASSERT_TRUE(after.empty());
    ASSERT_GT(bytes, 3u << 20);
  };
  fetch();  // what one answer needs, and the caches filled once
  const long before = server.rss_kib();
  std::vector<std::thread> clients;
  for (int c = 0; c < 10; ++c) {
    clients.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        fetch();
      }
    });
  }
  for (std::thread& client : clients) {
    client.join();
  }
  const long after = server.rss_kib();
  EXPECT_LE(after, before * 3 / 2) << "before " << before << " KiB, after " << after << " KiB";
  std::filesystem::remove_all(dir);
}

}  // namespace
