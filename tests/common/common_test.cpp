#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/dynamic_library.hpp"
#include "common/sysfs.hpp"
#include "common/text.hpp"
#include "common/utf8.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("zeus-common-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

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

TEST(Utf8, AcceptsWellFormedTextAndFindsTheFirstBadByte) {
  EXPECT_TRUE(zeus::is_valid_utf8(""));
  EXPECT_TRUE(zeus::is_valid_utf8("plain ascii"));
  EXPECT_TRUE(zeus::is_valid_utf8("\xC3\xBC \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"));
  EXPECT_EQ(zeus::first_invalid_utf8("ab\xFF"), 2u);
  EXPECT_EQ(zeus::first_invalid_utf8("\xC0\xAF"), 0u);          // overlong '/'
  EXPECT_EQ(zeus::first_invalid_utf8("x\xE0\x80\xAF"), 1u);     // overlong, 3 bytes
  EXPECT_EQ(zeus::first_invalid_utf8("\xED\xA0\x80"), 0u);      // surrogate U+D800
  EXPECT_EQ(zeus::first_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(zeus::first_invalid_utf8("\xE2\x82"), 0u);          // truncated
  EXPECT_EQ(zeus::first_invalid_utf8("\x80"), 0u);              // lone continuation
  EXPECT_EQ(zeus::first_invalid_utf8(std::string("a\0b", 3)), std::string::npos);
}

TEST(Utf8, ToValidReplacesEachBadByte) {
  EXPECT_EQ(zeus::to_valid_utf8("ok \xC3\xBC"), "ok \xC3\xBC");
  const std::string replacement = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(zeus::to_valid_utf8(std::string("a\xFF\xFE") + "b"),
            "a" + replacement + replacement + "b");
  EXPECT_TRUE(zeus::is_valid_utf8(zeus::to_valid_utf8("\xE2\x82 \xED\xA0\x80 \xC0")));
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

TEST(Text, TrimRemovesOnlyTheGivenCharactersAtTheEnds) {
  EXPECT_EQ(zeus::text::trim("  a b \t\r\n"), "a b");
  EXPECT_EQ(zeus::text::trim(" \t "), "");
  EXPECT_EQ(zeus::text::trim(""), "");
  EXPECT_EQ(zeus::text::trim("\"x\" ", "\" "), "x");
}

TEST(Text, SplitKeepsEmptyPiecesUnlessAsked) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(zeus::text::split("a,,b", ','), (V{"a", "", "b"}));
  EXPECT_EQ(zeus::text::split("", ','), (V{""}));
  EXPECT_EQ(zeus::text::split_trimmed(" a , ,b,", ','), (V{"a", "", "b", ""}));
  EXPECT_EQ(zeus::text::split_trimmed(" a , ,b,", ',', true), (V{"a", "b"}));
  EXPECT_EQ(zeus::text::split_to_strings("x; y", ';'), (std::vector<std::string>{"x", "y"}));
}

TEST(Text, ReadFileKeepsEveryByteAndNamesAMissingFile) {
  TempDir dir;
  const auto path = dir.path() / "f";
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string("a\0b\n ", 5);
  }
  EXPECT_EQ(zeus::text::read_file(path), std::string("a\0b\n ", 5));
  try {
    zeus::text::read_file(dir.path() / "missing");
    FAIL() << "expected an error";
  } catch (const zeus::Error& e) {
    EXPECT_EQ(e.kind(), zeus::ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
}

TEST(Text, Fnv1aMatchesThePublishedVectors) {
  EXPECT_EQ(zeus::text::fnv1a_32(""), 0x811c9dc5U);
  EXPECT_EQ(zeus::text::fnv1a_32("a"), 0xe40c292cU);
  EXPECT_EQ(zeus::text::fnv1a_64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(zeus::text::fnv1a_64("a"), 0xaf63dc4c8601ec8cULL);
}

TEST(Units, ConvertExactly) {
  EXPECT_EQ(zeus::units::watts_from_milliwatts(300'000), 300.0);
  EXPECT_EQ(zeus::units::whole_watts_from_milliwatts(299'999), 299);
  EXPECT_EQ(zeus::units::joules_from_microjoules(2'500'000), 2.5);
  EXPECT_EQ(zeus::units::seconds_from_nanoseconds(std::int64_t{1'500'000'000}), 1.5);
  EXPECT_EQ(zeus::units::millijoules_at(1000.0, 2'000'000'000), 2000.0);
  static_assert(zeus::units::milliwatts_from_watts(1.5) == 1500.0);
}
