#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

#include "common/dynamic_library.hpp"
#include "common/process.hpp"
#include "common/signals.hpp"
#include "common/sysfs.hpp"
#include "common/text.hpp"
#include "support/temp_dir.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace {

namespace fs = std::filesystem;

using zeus::testing::TempDir;

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(ManualClock, MovesOnlyWhenAdvanced) {
  zeus::ManualClock clock(5);
  EXPECT_EQ(clock.now_ns(), 5);
  clock.advance_s(1.5);
  EXPECT_EQ(clock.now_ns(), 1'500'000'005);
  EXPECT_DOUBLE_EQ(clock.now_s(), 1.500000005);
  EXPECT_THROW(clock.advance_ns(-1), zeus::Error);
}

TEST(LocalUtcOffset, FollowsTzIncludingDaylightSavingTime) {
  const char* before = std::getenv("TZ");
  const std::string saved = before != nullptr ? before : "";
  const auto set_tz = [](const char* value) {
    if (value != nullptr) {
      ::setenv("TZ", value, 1);
    } else {
      ::unsetenv("TZ");
    }
    ::tzset();
  };
  constexpr double kWinter = 1768478400.0;  // 2026-01-15T12:00:00Z
  constexpr double kSummer = 1784116800.0;  // 2026-07-15T12:00:00Z
  set_tz("UTC0");
  EXPECT_EQ(zeus::local_utc_offset_hours(kWinter), 0.0);
  set_tz("IST-5:30");  // POSIX TZ: the sign is west of UTC
  EXPECT_EQ(zeus::local_utc_offset_hours(kSummer), 5.5);
  set_tz("CET-1CEST,M3.5.0,M10.5.0/3");
  EXPECT_EQ(zeus::local_utc_offset_hours(kWinter), 1.0);
  EXPECT_EQ(zeus::local_utc_offset_hours(kSummer), 2.0);
  EXPECT_EQ(zeus::local_utc_offset_hours(std::nan("")), 0.0);
  EXPECT_EQ(zeus::local_utc_offset_hours(1e300), 0.0);
  set_tz(before != nullptr ? saved.c_str() : nullptr);
}

TEST(SteadyClock, NeverGoesBackwards) {
  zeus::SteadyClock clock;
  const auto first = clock.now_ns();
  EXPECT_GE(clock.now_ns(), first);
}

TEST(Sysfs, ReadsTrimmedTextAndIntegers) {
  TempDir dir;
  write(dir.path() / "name", "package-0\n");
  write(dir.path() / "energy_uj", "123456789\n");
  EXPECT_EQ(zeus::sysfs::read_text(dir.path() / "name"), "package-0");
  EXPECT_EQ(zeus::sysfs::read_uint64(dir.path() / "energy_uj"), 123456789u);
}

TEST(Sysfs, MissingFileIsNotFound) {
  try {
    zeus::sysfs::read_text("/nonexistent/zeus/file");
    FAIL() << "expected an error";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kNotFound);
    EXPECT_NE(std::string(error.what()).find("/nonexistent/zeus/file"), std::string::npos);
  }
}

TEST(Sysfs, GarbageIsAnIoErrorQuotingTheText) {
  TempDir dir;
  write(dir.path() / "energy_uj", "12ab\n");
  write(dir.path() / "huge", "99999999999999999999999\n");
  try {
    zeus::sysfs::read_uint64(dir.path() / "energy_uj");
    FAIL() << "expected an error";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kIo);
    EXPECT_NE(std::string(error.what()).find("12ab"), std::string::npos);
  }
  EXPECT_THROW(zeus::sysfs::read_uint64(dir.path() / "huge"), zeus::Error);
}

// Signed readings (hwmon's) share the unsigned ones' checks: a sign is allowed, nothing else.
TEST(Sysfs, SignedIntegersAndTheirGarbage) {
  TempDir dir;
  const auto read = [&](const std::string& text) {
    write(dir.path() / "in1_input", text);
    return zeus::sysfs::read_int64(dir.path() / "in1_input");
  };
  EXPECT_EQ(read("-5\n"), -5);
  EXPECT_EQ(read("+7\n"), 7);
  EXPECT_EQ(read("-9223372036854775808\n"), INT64_MIN);
  for (const std::string bad : {"-", "", "12a", "1-2", "9223372036854775808", "--1"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(read(bad), zeus::Error);
  }
  // What the error quotes is cut at 32 characters: the file may be anything.
  try {
    read(std::string(100, 'x'));
    FAIL() << "expected an error";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kIo);
    EXPECT_NE(std::string(error.what()).find(std::string(32, 'x') + "..."), std::string::npos);
    EXPECT_EQ(std::string(error.what()).find(std::string(33, 'x')), std::string::npos);
  }
  // The folder listing never throws: a missing folder is an error code and no entries.
  std::error_code error;
  EXPECT_TRUE(zeus::sysfs::list_entries(dir.path() / "absent", error).empty());
  EXPECT_TRUE(error);
  EXPECT_EQ(zeus::sysfs::list_entries(dir.path(), error).size(), 1u);
  EXPECT_FALSE(error);
}

TEST(DynamicLibrary, MissingLibraryIsLibraryNotFoundWithTheReason) {
  try {
    zeus::DynamicLibrary::open("libzeus-does-not-exist.so.7");
    FAIL() << "expected an error";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kLibraryNotFound);
    EXPECT_NE(std::string(error.what()).find("libzeus-does-not-exist.so.7"), std::string::npos);
  }
}

TEST(DynamicLibrary, FindsSymbolsAndReportsMissingOnesAsNull) {
  const auto library = zeus::DynamicLibrary::open("libm.so.6");
  EXPECT_NE(library->symbol("cos"), nullptr);
  EXPECT_EQ(library->symbol("zeus_no_such_symbol"), nullptr);
  EXPECT_NE(library->resolved_path().find("libm"), std::string::npos);
}

TEST(ErrorKindName, IsStable) {
  EXPECT_EQ(zeus::error_kind_name(zeus::ErrorKind::kNoPermission), "no_permission");
  EXPECT_EQ(zeus::error_kind_name(zeus::ErrorKind::kGpuLost), "gpu_lost");
}

// ---- Signals (real signals, sent to this test process with kill()) ----

bool same_handler(int signal, void (*handler)(int)) {
  struct sigaction current {};
  ::sigaction(signal, nullptr, &current);
  return current.sa_handler == handler;
}

std::atomic<int> g_test_handler_calls{0};
void count_signal(int /*signal*/) {
  g_test_handler_calls.fetch_add(1);
}

// Installs `handler` for `signal` for the scope, and the disposition from before afterwards.
class ScopedHandler {
 public:
  ScopedHandler(int signal, void (*handler)(int)) : signal_(signal) {
    struct sigaction action {};
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal, &action, &before_);
  }
  ~ScopedHandler() { ::sigaction(signal_, &before_, nullptr); }

 private:
  int signal_;
  struct sigaction before_ {};
};

TEST(SignalWatch, RecordsTheFirstStopSignalAndWakesTheWait) {
  const ScopedHandler keep(SIGTERM, count_signal);
  {
    zeus::SignalWatch watch;
    EXPECT_FALSE(watch.stop_signal());
    EXPECT_FALSE(watch.wait(0.01));
    ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
    EXPECT_TRUE(watch.wait(5.0));
    ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
    EXPECT_TRUE(watch.wait(5.0));
    EXPECT_EQ(watch.stop_signal(), SIGTERM);
    EXPECT_FALSE(same_handler(SIGTERM, count_signal));
  }
  // The handler from before is back, and zeus's never called it.
  EXPECT_TRUE(same_handler(SIGTERM, count_signal));
  EXPECT_EQ(g_test_handler_calls.load(), 0);
}

TEST(SignalWatch, EveryAliveWatchHearsASignal) {
  zeus::SignalWatch first;
  {
    zeus::SignalWatch second(zeus::SignalWatchOptions{.stop_signals = {SIGUSR1}});
    ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
    EXPECT_EQ(second.next_signal(5.0), SIGUSR1);
    EXPECT_EQ(second.stop_signal(), SIGUSR1);
    EXPECT_FALSE(first.wait(0.01));  // first does not watch SIGUSR1
    ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
    EXPECT_TRUE(first.wait(5.0));
    EXPECT_FALSE(second.wait(0.01));
  }
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  EXPECT_TRUE(first.wait(5.0));
  EXPECT_EQ(first.stop_signal(), SIGINT);
}

TEST(SignalWatch, ChildExitWakesTheWaitWithoutBeingAStopSignal) {
  zeus::SignalWatch watch(zeus::SignalWatchOptions{.wake_on_child_exit = true});
  auto started = zeus::ChildProcess::start({"true"});
  ASSERT_TRUE(std::holds_alternative<zeus::ChildProcess>(started));
  EXPECT_TRUE(watch.wait(5.0));
  EXPECT_EQ(std::get<zeus::ChildProcess>(started).wait().exit_code, 0);
  EXPECT_FALSE(watch.stop_signal());
}

TEST(SignalWatch, KeepIgnoredLeavesAnIgnoredSignalIgnored) {
  const ScopedHandler ignored(SIGUSR2, SIG_IGN);
  {
    zeus::SignalWatch watch(
        zeus::SignalWatchOptions{.stop_signals = {SIGUSR2}, .keep_ignored = true});
    EXPECT_TRUE(same_handler(SIGUSR2, SIG_IGN));
    ASSERT_EQ(::kill(::getpid(), SIGUSR2), 0);
    EXPECT_FALSE(watch.wait(0.05));
  }
  zeus::SignalWatch watch(zeus::SignalWatchOptions{.stop_signals = {SIGUSR2}});
  EXPECT_TRUE(zeus::forwarding::was_ignored(SIGUSR2));
  ASSERT_EQ(::kill(::getpid(), SIGUSR2), 0);
  EXPECT_TRUE(watch.wait(5.0));
}

TEST(SignalWatch, ReraiseRunsTheDispositionFromBefore) {
  const ScopedHandler keep(SIGUSR1, count_signal);
  g_test_handler_calls.store(0);
  zeus::SignalWatch watch(zeus::SignalWatchOptions{.stop_signals = {SIGUSR1}});
  ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
  ASSERT_EQ(watch.next_signal(5.0), SIGUSR1);
  EXPECT_EQ(g_test_handler_calls.load(), 0);
  zeus::SignalWatch::reraise(SIGUSR1);
  EXPECT_EQ(g_test_handler_calls.load(), 1);
  EXPECT_TRUE(same_handler(SIGUSR1, count_signal));
}

TEST(SignalWatch, ForwardsAStopSignalFromAnotherProcessToTheChild) {
  zeus::SignalWatch watch(zeus::SignalWatchOptions{.forward_to_child = true});
  auto started = zeus::ChildProcess::start({"sleep", "30"});
  ASSERT_TRUE(std::holds_alternative<zeus::ChildProcess>(started));
  auto& child = std::get<zeus::ChildProcess>(started);
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  EXPECT_TRUE(watch.wait(5.0));
  const zeus::ChildExit exit = child.wait();
  EXPECT_EQ(exit.signal, SIGTERM);
  EXPECT_EQ(exit.exit_code, 128 + SIGTERM);
  EXPECT_EQ(watch.stop_signal(), SIGTERM);
}

TEST(SignalWatch, ForwardsOtherSignalsToTheChildWithoutCountingThemAsStops) {
  const ScopedHandler keep(SIGUSR1, count_signal);
  zeus::SignalWatch watch(
      zeus::SignalWatchOptions{.forward_to_child = true, .forwarded_signals = {SIGUSR1}});
  auto started = zeus::ChildProcess::start({"sleep", "30"});
  ASSERT_TRUE(std::holds_alternative<zeus::ChildProcess>(started));
  auto& child = std::get<zeus::ChildProcess>(started);
  ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
  EXPECT_EQ(watch.next_signal(5.0), SIGUSR1);
  const zeus::ChildExit exit = child.wait();
  EXPECT_EQ(exit.signal, SIGUSR1);  // the child has the default disposition, not zeus's handler
  EXPECT_EQ(watch.stop_signal(), std::nullopt);
}

TEST(SignalWatch, AForwardedSignalIgnoredBeforeStaysIgnoredInTheChild) {
  // As under nohup: the watch installs no handler, and the child inherits the ignoring.
  const ScopedHandler ignore(SIGHUP, SIG_IGN);
  zeus::SignalWatch watch(
      zeus::SignalWatchOptions{.forward_to_child = true, .forwarded_signals = {SIGHUP}});
  EXPECT_TRUE(same_handler(SIGHUP, SIG_IGN));
  auto started = zeus::ChildProcess::start({"sh", "-c", "kill -HUP $$; exit 4"});
  ASSERT_TRUE(std::holds_alternative<zeus::ChildProcess>(started));
  EXPECT_EQ(std::get<zeus::ChildProcess>(started).wait().exit_code, 4);
}

// Blocks the stop signals in this thread for the scope (the threads it starts inherit that).
class BlockedStopSignals {
 public:
  BlockedStopSignals() : before_(zeus::block_stop_signals()) {}
  ~BlockedStopSignals() { ::pthread_sigmask(SIG_SETMASK, &before_, nullptr); }

 private:
  sigset_t before_;
};

// SIGPIPE pending or blocked in the calling thread.
bool sigpipe_pending() {
  sigset_t pending;
  sigemptyset(&pending);
  ::sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}
bool sigpipe_blocked() {
  sigset_t mask;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, SIGPIPE) == 1;
}

TEST(SigpipeGuard, AWriteToAClosedPeerIsEpipeAndTheSignalIsDropped) {
  const ScopedHandler keep(SIGPIPE, count_signal);  // counts what would otherwise kill the test
  g_test_handler_calls.store(0);
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ::close(fds[1]);
  {
    const zeus::SigpipeGuard guard;
    EXPECT_TRUE(sigpipe_blocked());
    errno = 0;
    EXPECT_EQ(::write(fds[0], "x", 1), -1);
    EXPECT_EQ(errno, EPIPE);
    EXPECT_TRUE(sigpipe_pending());  // raised, held back
  }
  // Taken, not deferred to the unblocking, and the mask is as it was.
  EXPECT_EQ(g_test_handler_calls.load(), 0);
  EXPECT_FALSE(sigpipe_pending());
  EXPECT_FALSE(sigpipe_blocked());
  // Outside a guard the same write raises it (the handler above stands in for death).
  EXPECT_EQ(::write(fds[0], "x", 1), -1);
  EXPECT_EQ(g_test_handler_calls.load(), 1);
  ::close(fds[0]);
}

TEST(SigpipeGuard, AThreadThatBlockedSigpipeItselfKeepsItsMaskAndItsSignal) {
  const ScopedHandler keep(SIGPIPE, count_signal);
  g_test_handler_calls.store(0);
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigset_t before;
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &pipe_only, &before), 0);
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ::close(fds[1]);
  {
    const zeus::SigpipeGuard outer;
    const zeus::SigpipeGuard nested;
    EXPECT_EQ(::write(fds[0], "x", 1), -1);
  }
  EXPECT_TRUE(sigpipe_blocked());
  EXPECT_TRUE(sigpipe_pending());  // the caller's to take
  const timespec no_wait{0, 0};
  EXPECT_EQ(::sigtimedwait(&pipe_only, nullptr, &no_wait), SIGPIPE);
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  EXPECT_EQ(g_test_handler_calls.load(), 0);
  ::close(fds[0]);
}

TEST(SigpipeGuard, GuardsOnlyItsOwnThread) {
  std::promise<void> guarded;
  std::future<bool> blocked_elsewhere = std::async(std::launch::async, [&] {
    guarded.get_future().wait();
    return sigpipe_blocked();
  });
  const zeus::SigpipeGuard guard;
  guarded.set_value();
  EXPECT_TRUE(sigpipe_blocked());
  EXPECT_FALSE(blocked_elsewhere.get());
}

TEST(ServeUntilSignal, StopsTheServerOnSigterm) {
  const BlockedStopSignals blocked;
  std::mutex mutex;
  std::condition_variable changed;
  bool stopped = false;
  int stops = 0;
  int logged = 0;
  std::thread sender([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::kill(::getpid(), SIGTERM);
  });
  const int received = zeus::serve_until_signal(
      [&] {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return stopped; });
      },
      [&] {
        std::lock_guard lock(mutex);
        stopped = true;
        ++stops;
        changed.notify_all();
      },
      zeus::ServeUntilSignalOptions{.on_signal = [&](int signal) { logged = signal; },
                                    .repeat_stop_every_s = std::nullopt});
  sender.join();
  EXPECT_EQ(received, SIGTERM);
  EXPECT_EQ(logged, SIGTERM);
  EXPECT_EQ(stops, 1);
}

TEST(ServeUntilSignal, RepeatsStopUntilServeReturns) {
  const BlockedStopSignals blocked;
  std::atomic<int> stops{0};
  std::thread sender([] { ::kill(::getpid(), SIGINT); });
  const int received = zeus::serve_until_signal(
      [&] {
        // Deaf to the first stops, as a server that is not listening yet.
        while (stops.load() < 3) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      },
      [&] { stops.fetch_add(1); });
  sender.join();
  EXPECT_EQ(received, SIGINT);
  EXPECT_GE(stops.load(), 3);
}

TEST(ServeUntilSignal, ReturnsZeroWhenServeEndsOnItsOwn) {
  const BlockedStopSignals blocked;
  bool stopped = false;
  EXPECT_EQ(zeus::serve_until_signal([] {}, [&] { stopped = true; }), 0);
  EXPECT_FALSE(stopped);
}

TEST(WaitForStopSignal, TimesOutOrTakesTheSignal) {
  const BlockedStopSignals blocked;
  EXPECT_FALSE(zeus::wait_for_stop_signal(0.02));
  ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
  EXPECT_EQ(zeus::wait_for_stop_signal(5.0), SIGINT);
}

// ---- Child processes ----

TEST(ChildProcess, ReportsExitCodesAndKillingSignals) {
  auto ok = zeus::ChildProcess::start({"sh", "-c", "exit 3"});
  ASSERT_TRUE(std::holds_alternative<zeus::ChildProcess>(ok));
  const zeus::ChildExit exit = std::get<zeus::ChildProcess>(ok).wait();
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_FALSE(exit.signal);

  auto sleeper = zeus::ChildProcess::start({"sleep", "30"});
  auto& child = std::get<zeus::ChildProcess>(sleeper);
  EXPECT_FALSE(child.try_wait());
  EXPECT_FALSE(child.wait_for(0.02));
  child.send_signal(SIGKILL);
  const auto killed = child.wait_for(5.0);
  ASSERT_TRUE(killed);
  EXPECT_EQ(killed->signal, SIGKILL);
  EXPECT_EQ(killed->exit_code, 128 + SIGKILL);
}

TEST(ChildProcess, AMissingCommandIsAStartFailure) {
  auto started = zeus::ChildProcess::start({"zeus-no-such-command-here"});
  ASSERT_TRUE(std::holds_alternative<zeus::ChildProcess::StartFailure>(started));
  const auto& failure = std::get<zeus::ChildProcess::StartFailure>(started);
  EXPECT_EQ(failure.error_number, ENOENT);
  EXPECT_NE(failure.message.find("cannot run 'zeus-no-such-command-here'"), std::string::npos);
  EXPECT_THROW(zeus::ChildProcess::start({}), zeus::Error);
  // Without PATH lookup, a bare name is a relative path.
  auto unsearched = zeus::ChildProcess::start({"sh", "-c", "true"},
                                              zeus::ChildProcessOptions{.search_path = false});
  EXPECT_TRUE(std::holds_alternative<zeus::ChildProcess::StartFailure>(unsearched));
}

TEST(ChildProcess, WritesItsOutputToAFileInAGroupOfItsOwn) {
  const TempDir dir;
  const fs::path log = dir.path() / "child.log";
  auto started = zeus::ChildProcess::start(
      {"/bin/sh", "-c", "echo out; echo err >&2; ps -o pgid= -p $$ | tr -d ' '; echo $$"},
      zeus::ChildProcessOptions{.search_path = false,
                                .own_process_group = true,
                                .output_file = log,
                                .parent_death_signal = SIGTERM});
  ASSERT_TRUE(std::holds_alternative<zeus::ChildProcess>(started));
  EXPECT_EQ(std::get<zeus::ChildProcess>(started).wait().exit_code, 0);
  const auto lines = zeus::text::split_to_strings(zeus::text::read_file(log), '\n', true);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "out");
  EXPECT_EQ(lines[1], "err");
  EXPECT_EQ(lines[2], lines[3]);  // its process group is its own pid

  auto unwritable = zeus::ChildProcess::start(
      {"true"}, zeus::ChildProcessOptions{.output_file = dir.path() / "missing" / "child.log"});
  ASSERT_TRUE(std::holds_alternative<zeus::ChildProcess::StartFailure>(unwritable));
  EXPECT_EQ(std::get<zeus::ChildProcess::StartFailure>(unwritable).error_number, ENOENT);
}

TEST(ChildProcess, PassesOnlyDescriptorsZeroToTwo) {
  // A descriptor without close-on-exec (as std::ofstream opens them) stays out of the child.
  const TempDir dir;
  const fs::path file = dir.path() / "kept-open.txt";
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 3);
  const int high_fd = ::dup2(fd, 200);
  ASSERT_EQ(high_fd, 200);
  const std::string script = "test -e /proc/$$/fd/200 && exit 8; { echo X >&" + std::to_string(fd) +
                             "; } 2>/dev/null || exit 9";
  auto started = zeus::ChildProcess::start({"sh", "-c", script});
  ASSERT_TRUE(std::holds_alternative<zeus::ChildProcess>(started));
  EXPECT_EQ(std::get<zeus::ChildProcess>(started).wait().exit_code, 9);
  ::close(fd);
  ::close(high_fd);
  EXPECT_EQ(zeus::text::read_file(file), "");
}

TEST(ChildProcess, NamesSignalsAndQuotesCommands) {
  EXPECT_EQ(zeus::signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(zeus::signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(zeus::signal_name(77), "signal 77");
  EXPECT_EQ(zeus::shell_join({"python", "train.py", "--lr=0.1"}), "python train.py --lr=0.1");
  EXPECT_EQ(zeus::shell_join({"echo", "it's", ""}), "echo 'it'\\''s' ''");
}

}  // namespace

TEST(ManualClock, SleepingAdvancesItAtOnce) {
  zeus::ManualClock clock(100);
  clock.sleep_for_ns(50);
  clock.sleep_for_s(1.0);
  clock.sleep_for_ns(-5);  // a negative sleep is no sleep
  EXPECT_EQ(clock.now_ns(), 100 + 50 + 1'000'000'000);
  EXPECT_EQ(clock.slept_ns(), 50 + 1'000'000'000);
  EXPECT_EQ(clock.sleeps(), 3);
}

TEST(SteadyClock, SleepsAtLeastTheDuration) {
  const auto clock = zeus::steady_clock();
  const std::int64_t start = clock->now_ns();
  clock->sleep_for_ns(2'000'000);
  EXPECT_GE(clock->now_ns() - start, 2'000'000);
}

TEST(Units, ConvertExactly) {
  EXPECT_EQ(zeus::units::watts_from_milliwatts(300'000), 300.0);
  EXPECT_EQ(zeus::units::whole_watts_from_milliwatts(299'999), 299);
  EXPECT_EQ(zeus::units::joules_from_microjoules(2'500'000), 2.5);
  EXPECT_EQ(zeus::units::seconds_from_nanoseconds(std::int64_t{1'500'000'000}), 1.5);
  EXPECT_EQ(zeus::units::millijoules_at(1000.0, 2'000'000'000), 2000.0);
  static_assert(zeus::units::milliwatts_from_watts(1.5) == 1500.0);
  // Garbage durations saturate instead of overflowing.
  EXPECT_EQ(zeus::units::nanoseconds_from_seconds(std::nan("")), 0);
  EXPECT_EQ(zeus::units::nanoseconds_from_seconds(1e300), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(zeus::units::nanoseconds_from_seconds(-1e300),
            std::numeric_limits<std::int64_t>::min());
}
