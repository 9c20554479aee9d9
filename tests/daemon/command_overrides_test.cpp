// --gpu-command-overrides: what a bad or untrusted file says at load time, and, through a running
// daemon, commands run instead of the library call (a script records its argv), timeouts,
// failures and error patterns as the request's error, with the daemon serving on.
#include "daemon/command_overrides.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "common/text.hpp"
#include "daemon/socket.hpp"
#include "support/expect_error.hpp"
#include "support/running_daemon.hpp"

namespace zeus::daemon {
namespace {

using zeus::testing::error_of;

void expect_parse_error(const std::string& toml, const std::string& expected) {
  const Error error = error_of([&] { CommandOverrides::parse(toml, "o.toml"); });
  EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument) << toml;
  EXPECT_NE(std::string(error.what()).find(expected), std::string::npos)
      << "TOML:\n"
      << toml << "\nerror: " << error.what();
}

TEST(CommandOverrides, BadFilesAreClearErrorsAtLoad) {
  expect_parse_error("[set_power_limit\ncommands = [\"x\"]\n", "o.toml:1:");
  expect_parse_error("[set_power_limit]\ncommands = [\"x\"]\n\n[set_fan_speed]\ncommands = []\n",
                     "unknown operation 'set_fan_speed' (known: set_persistence_mode,");
  expect_parse_error("[set_power_limit]\ncommands = [\"nvidia-smi -pl {power_limit_kw}\"]\n",
                     "unknown placeholder {power_limit_kw}");
  // Placeholders belong to their operation.
  expect_parse_error("[reset_gpu_locked_clocks]\ncommands = [\"x {min_clock_mhz}\"]\n",
                     "reset_gpu_locked_clocks takes gpu_id");
  expect_parse_error("[set_power_limit]\ncommands = []\n", "non-empty array");
  expect_parse_error("[set_power_limit]\ntimeout_s = 5\n", "[set_power_limit] has no commands");
  expect_parse_error("[set_power_limit]\ncommands = [\"x\"]\ntimeout_s = 0\n", "above 0");
  expect_parse_error("[set_power_limit]\ncommands = [\"x\"]\ntimeout = 5\n",
                     "unknown key 'timeout'");
  expect_parse_error("[set_power_limit]\ncommands = [\"x\"]\nerror_pattern = \"(\"\n",
                     "not a valid regular expression");
  expect_parse_error("set_power_limit = 3\n", "must be a table");

  const auto fine = CommandOverrides::parse(
      "[set_power_limit]\ncommands = [\"a {gpu_id} {power_limit_w}\", [\"b\", \"x y\"]]\n"
      "timeout_s = 1.5\n[reset_locked_clocks]\ncommands = [\"c {gpu_id}\"]\n",
      "o.toml");
  EXPECT_TRUE(fine->covers(GpuOperation::kSetPowerLimit));
  EXPECT_FALSE(fine->covers(GpuOperation::kSetPersistenceMode));
  EXPECT_EQ(fine->covered_names(), "set_power_limit, reset_locked_clocks");
}

TEST(CommandOverrides, UntrustedFilesAreRefused) {
  TempDir dir;
  const fs::path file = dir.path() / "overrides.toml";
  std::ofstream(file) << "[set_power_limit]\ncommands = [\"true\"]\n";
  ::chmod(file.c_str(), 0644);
  EXPECT_TRUE(CommandOverrides::load(file)->covers(GpuOperation::kSetPowerLimit));

  for (const mode_t mode : {0666, 0620, 0602}) {
    ::chmod(file.c_str(), mode);
    const Error error = error_of([&] { CommandOverrides::load(file); });
    EXPECT_EQ(error.kind(), ErrorKind::kNoPermission);
    EXPECT_NE(std::string(error.what()).find("chmod go-w"), std::string::npos) << error.what();
  }
  ::chmod(file.c_str(), 0644);
  if (::geteuid() == 0) {
    // Root's or the daemon user's only: here the daemon user is root, so give it to nobody.
    ASSERT_EQ(::chown(file.c_str(), 65534, 65534), 0);
    const Error error = error_of([&] { CommandOverrides::load(file); });
    EXPECT_EQ(error.kind(), ErrorKind::kNoPermission);
    EXPECT_NE(std::string(error.what()).find("owned by uid 65534"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(error_of([&] { CommandOverrides::load(dir.path() / "missing.toml"); }).kind(),
            ErrorKind::kNotFound);
  EXPECT_EQ(error_of([&] { CommandOverrides::load(dir.path()); }).kind(),
            ErrorKind::kInvalidArgument);
}

TEST(CommandOverrides, GpuControlNeedsNoRootWhenOverridden) {
  DaemonConfig config;
  EXPECT_THROW(check_startup_privileges(config, device::GpuBackend::kNvml, false), Error);
  config.gpu_commands_overridden = true;
  EXPECT_NO_THROW(check_startup_privileges(config, device::GpuBackend::kNvml, false));
}

// A daemon whose GPUs run the commands of `toml`, where {script} is a script that appends its
// arguments to <dir>/argv.log and prints "ok".
class Overridden {
 public:
  explicit Overridden(const std::string& toml_template) {
    script_ = dir_.path() / "record.sh";
    std::ofstream(script_) << "#!/bin/sh\necho \"$@\" >> " << (dir_.path() / "argv.log").string()
                           << "\necho ok\n";
    ::chmod(script_.c_str(), 0755);
    std::string toml = toml_template;
    for (std::size_t at; (at = toml.find("{script}")) != std::string::npos;) {
      toml.replace(at, 8, script_.string());
    }
    running_ = std::make_unique<Running>(DaemonConfig{}, 2, DaemonHooks{},
                                         CommandOverrides::parse(toml, "test.toml"));
  }
  Running& d() { return *running_; }
  std::string argv_log() const {
    std::ifstream in(dir_.path() / "argv.log");
    return {std::istreambuf_iterator<char>(in), {}};
  }

 private:
  TempDir dir_;
  fs::path script_;
  std::unique_ptr<Running> running_;
};

TEST(CommandOverrides, CommandsRunInsteadOfTheLibraryWithTheirPlaceholders) {
  Overridden o(
      "[set_power_limit]\ncommands = [\"{script} pl {gpu_id} {power_limit_mw} {power_limit_w}\"]\n"
      "[set_persistence_mode]\ncommands = [\"{script} pm {gpu_id} {enabled}\", "
      "[\"{script}\", \"two words\"]]\n"
      "[set_gpu_locked_clocks]\ncommands = [\"{script} lgc {gpu_id} {min_clock_mhz},"
      "{max_clock_mhz}\"]\n"
      "[reset_locked_clocks]\ncommands = [\"{script} rc {gpu_id}\"]\n");
  Running& d = o.d();
  const std::uint32_t before_mw = d.gpu(1).power_limit_mw();
  Reply r = post(d, "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=300500&block=true");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(d.gpu(1).power_limit_mw(), before_mw);  // the library was not called
  r = post(d, "/gpu/set_persistence_mode?gpu_ids=0,1&enabled=true&block=true");
  ASSERT_EQ(r.status, 200) << r.body;
  r = post(d,
           "/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=1000&max_clock_mhz=1500"
           "&block=true");
  ASSERT_EQ(r.status, 200) << r.body;
  r = post(d, "/gpu/reset_locked_clocks?gpu_ids=1&block=true");
  ASSERT_EQ(r.status, 200) << r.body;
  // Not overridden: the library.
  r = post(d,
           "/gpu/set_mem_locked_clocks?gpu_ids=0&min_clock_mhz=3201&max_clock_mhz=3201"
           "&block=true");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(dynamic_cast<device::SimulatedGpu&>(d.gpu(0)).locked_memory_clocks_mhz());
  // Validation still comes first: no command for an invalid request.
  r = post(d, "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=1&block=true");
  EXPECT_EQ(r.status, 400) << r.body;

  const std::string log = o.argv_log();
  EXPECT_NE(log.find("pl 1 300500 300\n"), std::string::npos) << log;
  // The two GPUs' commands run at once; each GPU's run in order.
  EXPECT_NE(log.find("pm 0 1\n"), std::string::npos) << log;
  EXPECT_NE(log.find("pm 1 1\n"), std::string::npos) << log;
  std::size_t two_words = 0;
  for (std::size_t at = 0; (at = log.find("two words\n", at)) != std::string::npos; ++at) {
    ++two_words;
  }
  EXPECT_EQ(two_words, 2u) << log;
  EXPECT_LT(log.find("pm 0 1\n"), log.rfind("two words\n")) << log;
  EXPECT_NE(log.find("lgc 0 1000,1500\n"), std::string::npos) << log;
  EXPECT_NE(log.find("rc 1\n"), std::string::npos) << log;
  EXPECT_EQ(log.find(" 1\n", log.find("rc 1\n") + 5), std::string::npos) << log;
}

TEST(CommandOverrides, FailuresAreTheRequestsErrorAndTheDaemonServesOn) {
  Overridden o(
      "[set_power_limit]\ncommands = [\"sleep 30\"]\ntimeout_s = 0.3\n"
      "[set_persistence_mode]\ncommands = [\"sh -c echo_broken;exit_3\"]\n"
      "[reset_gpu_locked_clocks]\ncommands = [\"{script} reset\"]\nerror_pattern = \"o+k\"\n"
      "[reset_mem_locked_clocks]\ncommands = [\"/nonexistent/tool\"]\n");
  Running& d = o.d();
  const auto started = std::chrono::steady_clock::now();
  Reply r = post(d, "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000&block=true");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_NE(r.body.find("command override for set_power_limit on GPU 0: `sleep 30` did not "
                        "finish within its timeout of 0.3 s and was killed"),
            std::string::npos)
      << r.body;

  r = post(d, "/gpu/set_persistence_mode?gpu_ids=0&enabled=true&block=true");
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_NE(r.body.find("exited with status"), std::string::npos) << r.body;

  r = post(d, "/gpu/reset_gpu_locked_clocks?gpu_ids=1&block=true");
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_NE(r.body.find("printed the error_pattern 'o+k'; output: ok"), std::string::npos)
      << r.body;

  r = post(d, "/gpu/reset_mem_locked_clocks?gpu_ids=1&block=true");
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_NE(r.body.find("could not be started"), std::string::npos) << r.body;

  // Still serving, reads and non-overridden writes alike.
  EXPECT_EQ(get(d, "/discover").status, 200);
  r = post(d,
           "/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=1000&max_clock_mhz=1500"
           "&block=true");
  EXPECT_EQ(r.status, 200) << r.body;
  // A non-blocking request that fails later is only logged; the next one still runs.
  r = post(d, "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=300000&block=false");
  EXPECT_EQ(r.status, 200) << r.body;
  r = post(d, "/gpu/reset_gpu_locked_clocks?gpu_ids=0&block=true");
  EXPECT_EQ(r.status, 500) << r.body;
}

}  // namespace
}  // namespace zeus::daemon
