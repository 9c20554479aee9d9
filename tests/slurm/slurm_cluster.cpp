// The Slurm suite's cluster (slurm_cluster.hpp).
#include "slurm_cluster.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>

#include "zeus/common/error.hpp"

namespace zeus::testing {

namespace {

std::string quote(const std::string& text) {
  std::string out = "'";
  for (const char c : text) {
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return out + "'";
}

}  // namespace

CommandResult run_shell(const std::string& script) {
  CommandResult result;
  const auto start = std::chrono::steady_clock::now();
  const std::string command = "bash -c " + quote(script) + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) {
    return result;
  }
  char buffer[4096];
  std::size_t read = 0;
  while ((read = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) {
    result.output.append(buffer, read);
  }
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

SlurmCluster& SlurmCluster::get() {
  static SlurmCluster* const cluster = new SlurmCluster();
  return *cluster;
}

std::string SlurmCluster::plugstack_line() const {
  return std::string("required ") + ZEUS_SPANK_PLUGIN_PATH + " zeusd_socket=" + zeusd_socket() +
         " state_dir=" + state_dir() +
         " min_power_limit=100 max_power_limit=700 zeusd_timeout=1000";
}

void SlurmCluster::SetUp() {
  if (::geteuid() != 0) {
    skip_reason_ = "the Slurm suite needs root (slurmd starts jobs as their users)";
    return;
  }
  char pattern[] = "/tmp/zeus-slurm-XXXXXX";
  if (!::mkdtemp(pattern)) {
    skip_reason_ = "cannot make a temporary directory";
    return;
  }
  dir_ = pattern;
  ::chmod(dir_.c_str(), 0755);  // jobs run as nobody read slurm.conf here
  ::setenv("SLURM_CONF", (dir_ / "slurm.conf").c_str(), 1);
  start_zeusd();
  const CommandResult started = run_shell(std::string(ZEUS_LOCAL_CLUSTER_SCRIPT) + " start " +
                                          dir_.string() + " " + quote(plugstack_line()));
  started_ = true;
  if (started.status == 77) {
    skip_reason_ = "Slurm cannot start here: " + started.output;
  } else if (started.status != 0) {
    skip_reason_ =
        "local_cluster.sh start failed (" + std::to_string(started.status) + "): " + started.output;
    ADD_FAILURE() << skip_reason_;
  }
}

void SlurmCluster::TearDown() {
  if (started_) {
    run_shell(std::string(ZEUS_LOCAL_CLUSTER_SCRIPT) + " stop " + dir_.string());
  }
  zeusd_.reset();
  zeusd_process_.reset();
  if (!dir_.empty() && std::getenv("ZEUS_KEEP_SLURM_DIR") == nullptr) {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
}

void SlurmCluster::start_zeusd(const std::vector<std::string>& extra) {
  stop_zeusd();
  std::vector<std::string> args{
      ZEUSD_PATH, "serve", "--socket-path", zeusd_socket(), "--socket-permissions", "666"};
  args.insert(args.end(), extra.begin(), extra.end());
  zeusd_process_ = std::make_unique<SpawnedProcess>(
      args, dir_ / "zeusd.log",
      std::vector<std::pair<std::string, std::string>>{{"ZEUS_SIMULATED_GPUS", "4:h200"}});
  const auto up =
      seconds_until([&] { return fs::exists(zeusd_socket()); }, std::chrono::seconds(10));
  ASSERT_TRUE(up.has_value()) << zeusd_process_->log();
  device::ZeusdConfig config;
  config.socket_path = zeusd_socket();
  zeusd_ = std::make_unique<device::ZeusdConnection>(config);
}

void SlurmCluster::stop_zeusd() {
  zeusd_.reset();
  if (zeusd_process_) {
    zeusd_process_->signal(SIGTERM);
    zeusd_process_->wait_for(std::chrono::seconds(5));
    zeusd_process_.reset();
  }
  std::error_code ignored;
  fs::remove(zeusd_socket(), ignored);
}

device::ZeusdConnection& SlurmCluster::zeusd() {
  return *zeusd_;
}

std::vector<std::uint32_t> SlurmCluster::power_limits_w() {
  const auto body = nlohmann::json::parse(zeusd_->get("read limits", "/gpu/get_power_limit"));
  std::vector<std::uint32_t> limits;
  for (int gpu = 0; gpu < 4; ++gpu) {
    limits.push_back(body.at(std::to_string(gpu)).at("power_limit_mw").get<std::uint32_t>() / 1000);
  }
  return limits;
}

double SlurmCluster::energy_j(int gpu) {
  const auto body = nlohmann::json::parse(
      zeusd_->get("read energy", "/gpu/get_cumulative_energy?gpu_ids=" + std::to_string(gpu)));
  return body.at(std::to_string(gpu)).at("energy_mj").get<double>() / 1000.0;
}

void SlurmCluster::restart_slurmd() {
  ASSERT_TRUE(wait_queue_empty()) << run_shell("squeue").output;
  const CommandResult restarted =
      run_shell(std::string(ZEUS_LOCAL_CLUSTER_SCRIPT) + " restart-slurmd " + dir_.string());
  ASSERT_EQ(restarted.status, 0) << restarted.output;
}

void SlurmCluster::set_plugstack(const std::string& line) {
  std::ofstream(dir_ / "plugstack.conf", std::ios::trunc) << line << '\n';
  restart_slurmd();
}

void SlurmCluster::restart_slurmd_mid_job() {
  const CommandResult restarted =
      run_shell(std::string(ZEUS_LOCAL_CLUSTER_SCRIPT) + " restart-slurmd " + dir_.string());
  ASSERT_EQ(restarted.status, 0) << restarted.output;
}

void SlurmCluster::set_epilog_status(int status) {
  const fs::path path = dir_ / "epilog.sh";
  std::ofstream(path, std::ios::trunc) << "#!/bin/sh\nexit " << status << "\n";
  ::chmod(path.c_str(), 0755);
}

bool SlurmCluster::wait_queue_empty(std::chrono::milliseconds timeout) {
  return seconds_until([] { return run_shell("squeue -h | wc -l").output == "0\n"; }, timeout)
      .has_value();
}

std::string SlurmCluster::admin_comment(std::uint32_t job_id) {
  const CommandResult shown = run_shell("scontrol show job " + std::to_string(job_id));
  const auto at = shown.output.find("AdminComment=");
  if (at == std::string::npos) {
    return "";
  }
  const auto end = shown.output.find('\n', at);
  std::string comment = shown.output.substr(at + 13, end - at - 13);
  while (!comment.empty() && comment.back() == ' ') {
    comment.pop_back();
  }
  return comment == "(null)" ? "" : comment;
}

std::uint32_t submitted_job_id(const std::string& sbatch_output) {
  std::smatch match;
  if (std::regex_search(sbatch_output, match, std::regex("Submitted batch job ([0-9]+)"))) {
    return static_cast<std::uint32_t>(std::stoul(match[1]));
  }
  return 0;
}

}  // namespace zeus::testing

// CTest reads exit status 77 as skipped: where Slurm cannot start, every test skips and so does
// the binary.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int status = RUN_ALL_TESTS();
  const std::string& reason = zeus::testing::SlurmCluster::get().skip_reason();
  if (status == 0 && !reason.empty()) {
    std::fprintf(stderr, "slurm_cluster_test: skipped: %s\n", reason.c_str());
    return 77;
  }
  return status;
}
