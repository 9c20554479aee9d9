// RAPL files readable only by root (Linux 5.10 and later): the errors say so and how to get the
// readings (rapl_test.cpp: discovery and reading).
#include <grp.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "rapl_test_support.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/rapl.hpp"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace zeus::testing::rapl;

// ---- Permissions ----
//
// Since Linux 5.10 energy_uj is mode 0400 (root only). The fake tree reproduces that with chmod.
// Root bypasses file modes, so as root these checks run in a forked child that really drops to
// the `nobody` user; they skip only when neither is possible.

constexpr uid_t kNobodyId = 65534;

// Drops the process to uid/gid 65534; returns an empty string or why it failed.
std::string drop_privileges() {
  if (::setgroups(0, nullptr) != 0 && errno != EPERM) {
    return std::string("setgroups: ") + std::strerror(errno);
  }
  if (::setresgid(kNobodyId, kNobodyId, kNobodyId) != 0) {
    return std::string("setresgid: ") + std::strerror(errno);
  }
  if (::setresuid(kNobodyId, kNobodyId, kNobodyId) != 0) {
    return std::string("setresuid: ") + std::strerror(errno);
  }
  return "";
}

struct ChildOutcome {
  bool ok = false;     // the child ran and exited 0
  std::string output;  // what the body returned (or why it failed)
};

// Runs `body` in a forked child (killed after 20 s) and returns its text.
ChildOutcome run_in_child(const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) {
    return {false, std::string("pipe: ") + std::strerror(errno)};
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return {false, std::string("fork: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(20);
    std::string text;
    try {
      text = body();
    } catch (const std::exception& error) {
      text = std::string("unexpected exception: ") + error.what();
    }
    const char* data = text.data();
    std::size_t left = text.size();
    while (left > 0) {
      const ssize_t written = ::write(fds[1], data, left);
      if (written <= 0) {
        break;
      }
      data += written;
      left -= static_cast<std::size_t>(written);
    }
    ::close(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string output;
  char buffer[512];
  for (;;) {
    const ssize_t got = ::read(fds[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      break;
    }
    output.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!exited_ok) {
    output += " (child did not exit cleanly, status " + std::to_string(status) + ")";
  }
  return {exited_ok, output};
}

class RaplPermissionTest : public RaplTest {
 protected:
  void SetUp() override {
    RaplTest::SetUp();
    make_zone(root_ / "intel-rapl:0", "package-0", 1234);
    energy_ = root_ / "intel-rapl:0" / "energy_uj";
  }

  void make_root_only() { fs::permissions(energy_, fs::perms(0400)); }

  fs::path energy_;
};

constexpr const char* kSkipMarker = "SKIP: ";

TEST_F(RaplPermissionTest, DiscoveryReportsPermissionDeniedWithAdvice) {
  // chmod 000 stops everybody but root (CAP_DAC_OVERRIDE); see the forked variant below.
  fs::permissions(energy_, fs::perms::none);
  if (::access(energy_.c_str(), R_OK) == 0) {
    GTEST_SKIP() << "running as root: chmod 000 does not stop reads here; "
                    "DiscoveryAsUnprivilegedUser covers this case";
  }
  zeus::device::CpuDiscovery found;
  ASSERT_NO_THROW(found = zeus::device::discover_rapl_cpus(root_));
  EXPECT_FALSE(found.available);
  EXPECT_TRUE(found.cpus.empty());
  EXPECT_THAT(found.message, HasSubstr(energy_.string()));
  EXPECT_THAT(found.message, HasSubstr("only by root"));
  EXPECT_THAT(found.message, HasSubstr("zeusd"));
  EXPECT_THAT(found.message, HasSubstr("udev"));
}

TEST_F(RaplPermissionTest, ReadReportsPermissionDeniedWithAdvice) {
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  fs::permissions(energy_, fs::perms::none);
  if (::access(energy_.c_str(), R_OK) == 0) {
    GTEST_SKIP() << "running as root: chmod 000 does not stop reads here; "
                    "ReadAsUnprivilegedUser covers this case";
  }
  std::string what;
  catch_kind_or_fail([&] { found.cpus[0]->package_energy_uj(); }, zeus::ErrorKind::kNoPermission,
                     what);
  EXPECT_THAT(what, HasSubstr(energy_.string()));
  EXPECT_THAT(what, HasSubstr("only by root"));
  EXPECT_THAT(what, HasSubstr("zeusd"));
}

TEST_F(RaplPermissionTest, DiscoveryAsUnprivilegedUser) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "not root: DiscoveryReportsPermissionDeniedWithAdvice covers this case";
  }
  make_root_only();  // as on Linux >= 5.10
  const fs::path root = root_;
  const fs::path energy = energy_;
  const ChildOutcome outcome = run_in_child([&]() -> std::string {
    if (const std::string why = drop_privileges(); !why.empty()) {
      return kSkipMarker + why;
    }
    if (::access(energy.c_str(), R_OK) == 0) {
      return kSkipMarker + std::string("energy_uj is still readable after dropping root");
    }
    const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root);
    return std::string(found.available ? "available" : "unavailable") +
           " cpus=" + std::to_string(found.cpus.size()) + " message=" + found.message;
  });
  ASSERT_TRUE(outcome.ok) << outcome.output;
  if (outcome.output.rfind(kSkipMarker, 0) == 0) {
    GTEST_SKIP() << "cannot drop root privileges here: " << outcome.output;
  }
  EXPECT_THAT(outcome.output, HasSubstr("unavailable cpus=0 "));
  EXPECT_THAT(outcome.output, HasSubstr(energy_.string()));
  EXPECT_THAT(outcome.output, HasSubstr("only by root"));
  EXPECT_THAT(outcome.output, HasSubstr("zeusd"));
  EXPECT_THAT(outcome.output, HasSubstr("udev"));
}

TEST_F(RaplPermissionTest, ReadAsUnprivilegedUser) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "not root: ReadReportsPermissionDeniedWithAdvice covers this case";
  }
  make_root_only();
  const fs::path root = root_;
  const ChildOutcome outcome = run_in_child([&]() -> std::string {
    // Discover while privileged (the file is readable by root), then lose the privilege.
    const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root);
    if (found.cpus.size() != 1) {
      return "discovery as root failed: " + found.message;
    }
    if (const std::string why = drop_privileges(); !why.empty()) {
      return kSkipMarker + why;
    }
    try {
      found.cpus[0]->package_energy_uj();
    } catch (const zeus::Error& error) {
      return "kind=" + std::string(zeus::error_kind_name(error.kind())) + " what=" + error.what();
    }
    return "read succeeded without permission";
  });
  ASSERT_TRUE(outcome.ok) << outcome.output;
  if (outcome.output.rfind(kSkipMarker, 0) == 0) {
    GTEST_SKIP() << "cannot drop root privileges here: " << outcome.output;
  }
  EXPECT_THAT(outcome.output, HasSubstr("kind=no_permission "));
  EXPECT_THAT(outcome.output, HasSubstr(energy_.string()));
  EXPECT_THAT(outcome.output, HasSubstr("only by root"));
  EXPECT_THAT(outcome.output, HasSubstr("zeusd"));
}

}  // namespace
