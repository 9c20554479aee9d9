// The Slurm plugin's site arguments (plugstack.conf) and --zeus-power-limit, as an administrator
// making typos and a hostile user would write them: every mistake is refused with a message that
// names the argument or option and what is allowed, and never echoes raw control bytes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "slurm/site_config.hpp"
#include "support/expect_error.hpp"

namespace zeus::slurm {
namespace {

using zeus::testing::error_of;
using zeus::testing::expect_error;

SiteConfig site(const std::vector<std::string>& args) {
  return parse_site_args(args);
}

void expect_site_error(const std::vector<std::string>& args,
                       const std::vector<std::string>& fragments) {
  expect_error([&] { parse_site_args(args); }, ErrorKind::kInvalidArgument, fragments);
}

// No byte below 0x20 (newline and tab included) nor DEL in `text`.
bool printable(const std::string& text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      return false;
    }
  }
  return true;
}

TEST(SlurmSiteConfig, DefaultsWithoutArguments) {
  const SiteConfig config = site({});
  EXPECT_EQ(config.min_power_limit_w, 100u);
  EXPECT_EQ(config.max_power_limit_w, 1000u);
  EXPECT_FALSE(config.default_power_limit_w);
  EXPECT_TRUE(config.allow_off);
  ASSERT_TRUE(config.zeusd.socket_path);
  EXPECT_EQ(*config.zeusd.socket_path, "/run/zeusd/zeusd.sock");
  EXPECT_DOUBLE_EQ(config.zeusd.timeout_s, 2.0);
  EXPECT_FALSE(config.zeusd_token_file);
  EXPECT_EQ(config.state_dir, "/run/zeus-slurm");
  EXPECT_TRUE(config.admin_comment);
  EXPECT_EQ(config.max_recorded_steps, 256u);
  EXPECT_EQ(describe_range(config), "100-1000 W");
}

TEST(SlurmSiteConfig, EveryKey) {
  const SiteConfig config =
      site({"min_power_limit=150", "max_power_limit=600", "default_power_limit=400", "allow_off=no",
            "zeusd_socket=/var/run/z.sock", "zeusd_token_file=/etc/zeus/token", "zeusd_timeout=750",
            "state_dir=/var/lib/zeus-slurm", "admin_comment=false", "max_steps=3"});
  EXPECT_EQ(config.min_power_limit_w, 150u);
  EXPECT_EQ(config.max_power_limit_w, 600u);
  EXPECT_EQ(config.default_power_limit_w, 400u);
  EXPECT_FALSE(config.allow_off);
  EXPECT_EQ(config.zeusd.socket_path, "/var/run/z.sock");
  EXPECT_EQ(config.zeusd_token_file, "/etc/zeus/token");
  EXPECT_DOUBLE_EQ(config.zeusd.timeout_s, 0.75);
  EXPECT_EQ(config.state_dir, "/var/lib/zeus-slurm");
  EXPECT_FALSE(config.admin_comment);
  EXPECT_EQ(config.max_recorded_steps, 3u);
  EXPECT_EQ(describe_range(config), "150-600 W");
}

TEST(SlurmSiteConfig, YesNoSpellings) {
  for (const std::string yes : {"yes", "true", "1"}) {
    EXPECT_TRUE(site({"allow_off=" + yes}).allow_off) << yes;
    EXPECT_TRUE(site({"admin_comment=" + yes}).admin_comment) << yes;
  }
  for (const std::string no : {"no", "false", "0"}) {
    EXPECT_FALSE(site({"allow_off=" + no}).allow_off) << no;
    EXPECT_FALSE(site({"admin_comment=" + no}).admin_comment) << no;
  }
  for (const std::string bad : {"", "YES", "y", "on", "2", "yes "}) {
    expect_site_error({"allow_off=" + bad}, {"allow_off", "expected yes or no"});
    expect_site_error({"admin_comment=" + bad}, {"admin_comment", "expected yes or no"});
  }
}

TEST(SlurmSiteConfig, HostPortReplacesTheSocket) {
  const SiteConfig tcp = site({"zeusd_host_port=gpu-node-1:4938"});
  EXPECT_FALSE(tcp.zeusd.socket_path);
  EXPECT_EQ(tcp.zeusd.host, "gpu-node-1");
  EXPECT_EQ(tcp.zeusd.port, 4938);
  EXPECT_EQ(site({"zeusd_host_port=127.0.0.1:1"}).zeusd.port, 1);
  EXPECT_EQ(site({"zeusd_host_port=127.0.0.1:65535"}).zeusd.port, 65535);
  // The last of the two wins (a socket wins over host and port whenever it is set).
  const SiteConfig socket_last = site({"zeusd_host_port=h:80", "zeusd_socket=/z.sock"});
  EXPECT_EQ(socket_last.zeusd.socket_path, "/z.sock");
  const SiteConfig tcp_last = site({"zeusd_socket=/z.sock", "zeusd_host_port=h:80"});
  EXPECT_FALSE(tcp_last.zeusd.socket_path);
  EXPECT_EQ(tcp_last.zeusd.host, "h");
}

TEST(SlurmSiteConfig, BadHostPort) {
  for (const std::string bad : {"", "host", "host:", ":4938", "host:0", "host:65536", "host:-1",
                                "host:99999999999999999999", "host:80x", "host: 80", "host:+80"}) {
    expect_site_error({"zeusd_host_port=" + bad},
                      {"zeusd_host_port=", "HOST:PORT", "port from 1 to 65535"});
  }
}

TEST(SlurmSiteConfig, PathsMustBeAbsolute) {
  for (const std::string key : {"zeusd_socket", "state_dir", "zeusd_token_file"}) {
    for (const std::string bad : {"", "run/zeusd.sock", "./x", "~/x"}) {
      expect_site_error({key + "=" + bad}, {key + "=", "absolute path"});
    }
  }
}

TEST(SlurmSiteConfig, MissingEqualsOrKey) {
  for (const std::string bad : {"min_power_limit", "=250", "", "allow_off"}) {
    expect_site_error({bad}, {"plugstack.conf", "expected key=value"});
  }
}

TEST(SlurmSiteConfig, UnknownKeyListsTheKnownOnes) {
  expect_site_error({"max_power_limt=500"}, {"unknown argument 'max_power_limt'", "max_power_limit",
                                             "zeusd_socket", "max_steps"});
  // Keys are case-sensitive: a capitalised one is a typo, not a synonym.
  expect_site_error({"Min_power_limit=150"}, {"unknown argument 'Min_power_limit'"});
}

TEST(SlurmSiteConfig, WattsOutOfRangeOrMalformed) {
  for (const std::string key : {"min_power_limit", "max_power_limit", "default_power_limit"}) {
    for (const std::string bad : {"", "0", "-5", "100001", "99999999999999999999", "250W", " 250",
                                  "250 ", "2.5e2", "abc", "0x10"}) {
      expect_site_error({key + "=" + bad}, {key + "=", "whole watts from 1 to 100000"});
    }
  }
  EXPECT_EQ(site({"max_power_limit=100000"}).max_power_limit_w, 100000u);
  EXPECT_EQ(site({"min_power_limit=1"}).min_power_limit_w, 1u);
}

TEST(SlurmSiteConfig, MinAboveMax) {
  expect_site_error({"min_power_limit=500", "max_power_limit=400"},
                    {"min_power_limit=500", "above max_power_limit=400"});
  // Against the default maximum too.
  expect_site_error({"min_power_limit=1500"}, {"min_power_limit=1500", "max_power_limit=1000"});
  const SiteConfig equal = site({"min_power_limit=300", "max_power_limit=300"});
  EXPECT_EQ(describe_range(equal), "300-300 W");
}

TEST(SlurmSiteConfig, DefaultCapMustLieInTheRange) {
  // Checked after every argument is read, whatever their order.
  EXPECT_EQ(site({"default_power_limit=250", "min_power_limit=200"}).default_power_limit_w, 250u);
  expect_site_error({"default_power_limit=150", "min_power_limit=200", "max_power_limit=300"},
                    {"default_power_limit=150", "outside the allowed range 200-300 W"});
  expect_site_error({"default_power_limit=1001"}, {"default_power_limit=1001", "100-1000 W"});
  EXPECT_FALSE(site({"default_power_limit=none"}).default_power_limit_w);
  EXPECT_FALSE(site({"default_power_limit=250", "default_power_limit=none"}).default_power_limit_w);
  expect_site_error({"default_power_limit=None"}, {"default_power_limit=", "whole watts"});
}

TEST(SlurmSiteConfig, TimeoutInMilliseconds) {
  EXPECT_DOUBLE_EQ(site({"zeusd_timeout=10"}).zeusd.timeout_s, 0.01);
  EXPECT_DOUBLE_EQ(site({"zeusd_timeout=60000"}).zeusd.timeout_s, 60.0);
  for (const std::string bad : {"", "0", "9", "60001", "-1", "2s", "1.5", "99999999999999999999"}) {
    expect_site_error({"zeusd_timeout=" + bad},
                      {"zeusd_timeout=", "milliseconds from 10 to 60000"});
  }
}

TEST(SlurmSiteConfig, MaxSteps) {
  EXPECT_EQ(site({"max_steps=1"}).max_recorded_steps, 1u);
  EXPECT_EQ(site({"max_steps=100000"}).max_recorded_steps, 100000u);
  for (const std::string bad : {"", "0", "100001", "-1", "ten", "4294967297"}) {
    expect_site_error({"max_steps=" + bad}, {"max_steps=", "count from 1 to 100000"});
  }
}

TEST(SlurmSiteConfig, ErrorsDoNotEchoControlBytes) {
  for (const std::string& bad :
       {std::string("min_power_limit=2\x1b[2J"), std::string("zeusd_socket=\x1b]0;x\x07"),
        std::string("bogus\x1b[31m=1"), std::string("\x1b[31m"), std::string("state_dir=\xff\xfe"),
        std::string("allow_off=\x01"), std::string("max_steps=1\n2")}) {
    const Error error = error_of([&] { parse_site_args({bad}); });
    EXPECT_TRUE(printable(error.what())) << error.what();
  }
}

SiteConfig range(std::uint32_t min, std::uint32_t max, bool allow_off = true) {
  SiteConfig config;
  config.min_power_limit_w = min;
  config.max_power_limit_w = max;
  config.allow_off = allow_off;
  return config;
}

TEST(SlurmPowerLimitOption, WholeWattsWithOrWithoutW) {
  const SiteConfig config = range(100, 700);
  EXPECT_EQ(parse_power_limit_option("250", config), (PowerLimitRequest{.watts = 250}));
  EXPECT_EQ(parse_power_limit_option("250W", config), (PowerLimitRequest{.watts = 250}));
  EXPECT_EQ(parse_power_limit_option("250w", config), (PowerLimitRequest{.watts = 250}));
  EXPECT_EQ(parse_power_limit_option("0250", config), (PowerLimitRequest{.watts = 250}));
  // The ends of the range are in it.
  EXPECT_EQ(parse_power_limit_option("100", config).watts, 100u);
  EXPECT_EQ(parse_power_limit_option("700W", config).watts, 700u);
}

TEST(SlurmPowerLimitOption, Off) {
  EXPECT_EQ(parse_power_limit_option("off", range(100, 700)), (PowerLimitRequest{.off = true}));
  expect_error([] { parse_power_limit_option("off", range(100, 700, false)); },
               ErrorKind::kInvalidArgument,
               {"--zeus-power-limit=off", "does not allow", "100-700 W"});
  // Only the exact word.
  for (const std::string near : {"OFF", "Off", "off ", "offW", "of", "none", "no"}) {
    expect_error([&] { parse_power_limit_option(near, range(100, 700)); },
                 ErrorKind::kInvalidArgument, {"--zeus-power-limit=", "100-700 W"});
  }
}

TEST(SlurmPowerLimitOption, MalformedNamesTheOptionAndTheRange) {
  for (const std::string bad :
       {"", "abc", "1e3", " 250", "250 ", "-5", "+250", "250.0", "250WW", "W", "250 W", "250kW",
        "99999999999999999999", "18446744073709551616", "0x100", "２５０"}) {
    const Error error = error_of([&] { parse_power_limit_option(bad, range(100, 700)); });
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument) << bad;
    const std::string text = error.what();
    EXPECT_NE(text.find("--zeus-power-limit="), std::string::npos) << text;
    EXPECT_NE(text.find("100-700 W"), std::string::npos) << text;
    EXPECT_NE(text.find("or off"), std::string::npos) << text;
  }
  // Without off allowed, the message does not offer it.
  const Error error = error_of([] { parse_power_limit_option("abc", range(100, 700, false)); });
  EXPECT_EQ(std::string(error.what()).find("off"), std::string::npos) << error.what();
}

TEST(SlurmPowerLimitOption, OutOfRangeNamesTheRange) {
  for (const std::string bad : {"0", "99", "701", "4294967296", "100000"}) {
    expect_error([&] { parse_power_limit_option(bad, range(100, 700)); },
                 ErrorKind::kInvalidArgument,
                 {"--zeus-power-limit=" + bad, "outside the range this cluster allows, 100-700 W"});
  }
}

TEST(SlurmPowerLimitOption, HostileBytesAreNotEchoed) {
  for (const std::string& bad : {std::string("\x1b[2J\x1b[H250"),
                                 std::string("250\x1b]0;owned\x07"), std::string("\xff\xfe\xfd"),
                                 std::string("25\x00"
                                             "0",
                                             4),
                                 std::string("250\nerror: fake"), std::string("250\r"),
                                 std::string("\x9b"
                                             "31m"),
                                 std::string("\xc3")}) {
    const Error error = error_of([&] { parse_power_limit_option(bad, range(100, 700)); });
    const std::string text = error.what();
    EXPECT_TRUE(printable(text)) << text;
    EXPECT_NE(text.find("--zeus-power-limit="), std::string::npos) << text;
    EXPECT_NE(text.find("100-700 W"), std::string::npos) << text;
  }
}

TEST(SlurmPowerLimitOption, LongValueIsShortenedInTheMessage) {
  const std::string huge(100000, '9');
  const Error error = error_of([&] { parse_power_limit_option(huge, range(100, 700)); });
  EXPECT_LT(std::string(error.what()).size(), 400u);
  // A multi-byte character cut at the shortening point is escaped, not left half-printed.
  const std::string accents = std::string(63, 'x') + "\xc3\xa9";
  const Error cut = error_of([&] { parse_power_limit_option(accents, range(100, 700)); });
  EXPECT_TRUE(printable(cut.what())) << cut.what();
}

TEST(SlurmPowerLimitOption, EffectiveCap) {
  SiteConfig config = range(100, 700);
  EXPECT_FALSE(effective_cap_w(std::nullopt, config));
  EXPECT_EQ(effective_cap_w(PowerLimitRequest{.watts = 300}, config), 300u);
  config.default_power_limit_w = 400;
  EXPECT_EQ(effective_cap_w(std::nullopt, config), 400u);
  EXPECT_EQ(effective_cap_w(PowerLimitRequest{.watts = 300}, config), 300u);
  // off lifts the site's default cap.
  EXPECT_FALSE(effective_cap_w(PowerLimitRequest{.off = true}, config));
}

}  // namespace
}  // namespace zeus::slurm
