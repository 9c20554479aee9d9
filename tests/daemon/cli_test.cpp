// `zeusd serve`'s flags: the reference's shipped /etc/default/zeusd (a fixture written from it)
// parses through our CLI unchanged, every reference flag maps onto our config, and the startup
// message names the flag that gives each reference default we do not share.
#include "daemon/cli.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/text.hpp"
#include "daemon/auth.hpp"
#include "daemon/key_file.hpp"
#include "support/temp_dir.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon {
namespace {

namespace fs = std::filesystem;

struct Parsed {
  std::optional<int> exit_now;
  ServeArgs args;
  std::string out;
  std::string err;
};

Parsed parse(const std::vector<std::string>& words) {
  std::vector<const char*> argv = {"serve"};
  for (const std::string& word : words) {
    argv.push_back(word.c_str());
  }
  Parsed parsed;
  std::ostringstream out;
  std::ostringstream err;
  parsed.exit_now =
      parse_serve_args(static_cast<int>(argv.size()), argv.data(), parsed.args, out, err);
  parsed.out = out.str();
  parsed.err = err.str();
  return parsed;
}

// Every ZEUSD_ARGS="..." value in the defaults file, commented out or not, split as the unit's
// `$ZEUSD_ARGS` is (on whitespace).
std::vector<std::vector<std::string>> zeusd_args_lines(const std::string& path) {
  std::vector<std::vector<std::string>> lines;
  std::istringstream in(text::read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t at = line.find("ZEUSD_ARGS=\"");
    if (at == std::string::npos) {
      continue;
    }
    const std::string value =
        line.substr(at + 12, line.rfind('"') - (at + 12));  // between the quotes
    lines.push_back(text::split_to_strings(value, ' ', /*drop_empty=*/true));
  }
  return lines;
}

TEST(ZeusdCli, TheReferenceDefaultsFileParses) {
  const auto lines = zeusd_args_lines(ZEUSD_TEST_DATA "/reference_zeusd.defaults");
  ASSERT_GE(lines.size(), 5u);
  for (const auto& words : lines) {
    const Parsed parsed = parse(words);
    EXPECT_FALSE(parsed.exit_now.has_value())
        << fmt::format("{}", fmt::join(words, " ")) << ": " << parsed.err;
  }
  // The shipped line.
  const Parsed shipped = parse(lines.front());
  EXPECT_EQ(shipped.args.config.worker_threads, 10);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(parse(lines[i]).args.config.worker_threads, 10) << i;
  }
  const Parsed tcp = parse(lines[1]);
  EXPECT_EQ(tcp.args.config.mode, TransportMode::kTcp);
  EXPECT_EQ(tcp.args.config.tcp_bind_address, "0.0.0.0:4938");
  const Parsed monitoring = parse(lines[2]);
  EXPECT_EQ(monitoring.args.config.enabled_groups,
            (std::vector<ApiGroup>{ApiGroup::kGpuRead, ApiGroup::kCpuRead}));
  EXPECT_EQ(parse(lines[3]).args.signing_key_path, "/etc/zeusd/signing.key");
  const Parsed all = parse(lines[4]);
  EXPECT_EQ(all.args.config.socket_permissions, 0666u);
  EXPECT_EQ(all.args.config.socket_uid, 0u);
  EXPECT_EQ(all.args.config.socket_gid, 0u);
  EXPECT_EQ(all.args.config.gpu_power_poll_hz, 20.0);
  EXPECT_EQ(all.args.config.cpu_power_poll_hz, 10.0);
  EXPECT_EQ(all.args.gpu_backend, GpuBackendChoice::kAuto);
  EXPECT_EQ(parse(lines[5]).args.gpu_backend, GpuBackendChoice::kNvml);
  EXPECT_EQ(parse(lines[6]).args.gpu_backend, GpuBackendChoice::kAmdSmi);
  EXPECT_EQ(parse(lines[6]).args.gpu_command_overrides_path, "/etc/zeusd/gpu-overrides.toml");
}

// Our own packaging: every ZEUSD_ARGS of packaging/systemd/zeusd.default parses, and the unit
// runs `zeusd serve $ZEUSD_ARGS` as the reference's does.
TEST(ZeusdCli, OurPackagingTakesTheReferenceVariable) {
  auto lines = zeusd_args_lines(ZEUSD_PACKAGING "/zeusd.default");
  ASSERT_GE(lines.size(), 5u);
  for (auto& words : lines) {
    // The group `zeusd` exists where the package is installed, not necessarily here.
    for (std::size_t i = 1; i < words.size(); ++i) {
      if (words[i - 1] == "--socket-gid") {
        words[i].assign(1, '0');  // (not = "0": GCC 12 -O3 warns wrongly)
      }
    }
    const Parsed parsed = parse(words);
    EXPECT_FALSE(parsed.exit_now.has_value())
        << fmt::format("{}", fmt::join(words, " ")) << ": " << parsed.err;
  }
  const std::string unit = text::read_file(ZEUSD_PACKAGING "/zeusd.service");
  EXPECT_NE(unit.find("\nExecStart=/usr/local/bin/zeusd serve $ZEUSD_ARGS\n"), std::string::npos)
      << unit;
  EXPECT_NE(unit.find("\nEnvironmentFile=-/etc/default/zeusd\n"), std::string::npos) << unit;
}

TEST(ZeusdCli, DefaultsAndBadValues) {
  const Parsed none = parse({});
  ASSERT_FALSE(none.exit_now.has_value()) << none.err;
  EXPECT_EQ(none.args.config.socket_permissions, 0660u);
  EXPECT_EQ(none.args.config.worker_threads, 16);
  EXPECT_EQ(none.args.gpu_backend, GpuBackendChoice::kAuto);
  EXPECT_TRUE(none.args.gpu_command_overrides_path.empty());
  EXPECT_EQ(parse({"--gpu-command-overrides", "/etc/zeusd/overrides.toml"})
                .args.gpu_command_overrides_path,
            "/etc/zeusd/overrides.toml");

  EXPECT_EQ(parse({"--gpu-backend", "cuda"}).exit_now, 2);
  EXPECT_EQ(parse({"--num-workers", "0"}).exit_now, 2);
  EXPECT_EQ(parse({"--num-workers", "x"}).exit_now, 2);
  EXPECT_EQ(parse({"--mode", "named-pipe"}).exit_now, 2);
  EXPECT_EQ(parse({"--bogus"}).exit_now, 2);
  const Parsed help = parse({"--help"});
  EXPECT_EQ(help.exit_now, 0);
  for (const char* flag : {"--num-workers", "--gpu-backend", "--gpu-command-overrides",
                           "--gpu-power-poll-hz", "--cpu-power-poll-hz", "--socket-permissions"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag << "\n" << help.out;
  }
  ServeArgs args;
  const char* bad_mode[] = {"serve", "--socket-permissions", "999"};
  std::ostringstream sink;
  EXPECT_THROW(parse_serve_args(3, bad_mode, args, sink, sink), Error);
}

TEST(ZeusdCli, StartupMessageNamesTheFlagsThatRestoreTheReferenceDefaults) {
  const std::vector<std::string> ours = reference_differences(parse({}).args);
  ASSERT_EQ(ours.size(), 2u);
  EXPECT_NE(ours[0].find("660"), std::string::npos) << ours[0];
  EXPECT_NE(ours[0].find("`--socket-permissions 666`"), std::string::npos) << ours[0];
  EXPECT_NE(ours[1].find("`--no-restore`"), std::string::npos) << ours[1];

  const auto keyed = reference_differences(parse({"--signing-key-path", "/k"}).args);
  ASSERT_EQ(keyed.size(), 3u);
  EXPECT_NE(keyed[1].find("mode 600"), std::string::npos) << keyed[1];
  EXPECT_NE(keyed[1].find("32 bytes"), std::string::npos) << keyed[1];
  EXPECT_NE(keyed[1].find("`--allow-weak-signing-key`"), std::string::npos) << keyed[1];
  EXPECT_EQ(
      reference_differences(parse({"--signing-key-path", "/k", "--allow-weak-signing-key"}).args)
          .size(),
      2u);

  // Asked for the reference's behaviour: nothing to say.
  EXPECT_TRUE(
      reference_differences(parse({"--socket-permissions", "666", "--no-restore"}).args).empty());
  EXPECT_EQ(reference_differences(parse({"--mode", "tcp", "--no-restore"}).args).size(), 0u);
}

// --allow-weak-signing-key: the reference's key rules (any non-empty file), with warnings.
TEST(ZeusdCli, WeakKeysOnlyWhenAskedFor) {
  zeus::testing::TempDir dir;
  const fs::path key = dir.path() / "key";
  std::ofstream(key) << "sixteen-byte-key\n";
  ::chmod(key.c_str(), 0644);
  EXPECT_THROW(auth::load_signing_key(key), Error);
  EXPECT_EQ(auth::load_signing_key(key, /*reference_rules=*/true).bytes(), "sixteen-byte-key");
  std::ofstream(key, std::ios::trunc) << "\n";
  EXPECT_THROW(auth::load_signing_key(key, true), Error);  // empty: refused by both
  EXPECT_TRUE(parse({"--allow-weak-signing-key"}).args.allow_weak_signing_key);
}

}  // namespace
}  // namespace zeus::daemon
