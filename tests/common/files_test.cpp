// Reading inputs (text::read_file) and writing outputs (OutputFile) by the rules in docs/cli.md,
// "Input and output files", on real files, links, FIFOs and devices.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "common/output_file.hpp"
#include "common/text.hpp"
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"
#include "zeus/common/error.hpp"

namespace {

using zeus::testing::error_of;

namespace fs = std::filesystem;
using zeus::Error;
using zeus::ErrorKind;
using zeus::OutputFile;
using zeus::OutputFileOptions;

void write_plain(const fs::path& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

std::string read_plain(const fs::path& path) {
  return zeus::text::read_file(path);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::size_t entries_in(const fs::path& dir) {
  return static_cast<std::size_t>(
      std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

TEST(ReadFile, RefusesAFifoWithoutBlocking) {
  const zeus::testing::TempDir dir("zeus-files-test");
  const fs::path fifo = dir.path() / "trace.csv";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Error error = error_of([&] { zeus::text::read_file(fifo, "trace file"); });
  EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
  EXPECT_TRUE(contains(error.what(), "the trace file " + fifo.string())) << error.what();
  EXPECT_TRUE(contains(error.what(), "named pipe (FIFO), not a regular file")) << error.what();
}

TEST(ReadFile, RefusesDirectoriesAndDevicesNamingThem) {
  const zeus::testing::TempDir dir("zeus-files-test");
  const Error directory = error_of([&] { zeus::text::read_file(dir.path()); });
  EXPECT_EQ(directory.kind(), ErrorKind::kInvalidArgument);
  EXPECT_TRUE(contains(directory.what(), "it is a directory")) << directory.what();
  const Error device = error_of([&] { zeus::text::read_file("/dev/null"); });
  EXPECT_EQ(device.kind(), ErrorKind::kInvalidArgument);
  EXPECT_TRUE(contains(device.what(), "a character device")) << device.what();
  const Error missing = error_of([&] { zeus::text::read_file(dir.path() / "no", "profile"); });
  EXPECT_EQ(missing.kind(), ErrorKind::kNotFound);
  EXPECT_TRUE(contains(missing.what(), "cannot read the profile ")) << missing.what();
}

TEST(ReadFile, ReadsThroughASymlinkAndLeavesNoDescriptor) {
  const zeus::testing::TempDir dir("zeus-files-test");
  write_plain(dir.path() / "a", std::string(200000, 'x'));
  fs::create_symlink(dir.path() / "a", dir.path() / "link");
  const std::size_t before = entries_in("/proc/self/fd");
  EXPECT_EQ(zeus::text::read_file(dir.path() / "link").size(), 200000u);
  EXPECT_EQ(entries_in("/proc/self/fd"), before);
}

TEST(OutputFile, CreatesANewFileAndLeavesNoTemporary) {
  const zeus::testing::TempDir dir("zeus-files-test");
  zeus::write_output_file(dir.path() / "out.html", "<html>");
  EXPECT_EQ(read_plain(dir.path() / "out.html"), "<html>");
  EXPECT_EQ(entries_in(dir.path()), 1u);
}

TEST(OutputFile, ReplacesARegularFileAtomicallyKeepingItsPermissions) {
  const zeus::testing::TempDir dir("zeus-files-test");
  const fs::path out = dir.path() / "out.html";
  write_plain(out, "old");
  ASSERT_EQ(::chmod(out.c_str(), 0640), 0);
  {
    OutputFile file(out);
    file.write("new");
    EXPECT_EQ(read_plain(out), "old");  // not yet: the new content is in a temporary
    EXPECT_EQ(entries_in(dir.path()), 2u);
    file.commit();
  }
  EXPECT_EQ(read_plain(out), "new");
  struct stat info {};
  ASSERT_EQ(::stat(out.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0640u);
  EXPECT_EQ(entries_in(dir.path()), 1u);
}

TEST(OutputFile, WithoutCommitTheOldContentStays) {
  const zeus::testing::TempDir dir("zeus-files-test");
  const fs::path out = dir.path() / "out.html";
  write_plain(out, "old");
  {
    OutputFile file(out);
    file.write("half a page");
  }
  EXPECT_EQ(read_plain(out), "old");
  EXPECT_EQ(entries_in(dir.path()), 1u);
}

TEST(OutputFile, FollowsSymlinksAndKeepsThem) {
  const zeus::testing::TempDir dir("zeus-files-test");
  const fs::path real = dir.path() / "real.html";
  const fs::path link = dir.path() / "link.html";
  write_plain(real, "old");
  fs::create_symlink(real, link);
  zeus::write_output_file(link, "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_plain(real), "new");
  // A dangling link: the file it names is created.
  const fs::path dangling = dir.path() / "dangling.html";
  fs::create_symlink(dir.path() / "target.html", dangling);
  zeus::write_output_file(dangling, "made");
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_EQ(read_plain(dir.path() / "target.html"), "made");
}

TEST(OutputFile, WritesThroughCharacterDevicesWithoutReplacingThem) {
  const zeus::testing::TempDir dir("zeus-files-test");
  const fs::path link = dir.path() / "null";
  fs::create_symlink("/dev/null", link);
  OutputFile file(link);
  EXPECT_TRUE(file.writes_through());
  file.write(std::string(300000, 'x'));
  file.commit();
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_EQ(entries_in(dir.path()), 1u);
}

TEST(OutputFile, WritesThroughAFifoToItsReader) {
  const zeus::testing::TempDir dir("zeus-files-test");
  const fs::path fifo = dir.path() / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] {
    std::ifstream in(fifo, std::ios::binary);
    received.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  });
  zeus::write_output_file(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(received, "through the pipe");
  struct stat info {};
  ASSERT_EQ(::lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
}

TEST(OutputFile, AFailedWriteIsAnErrorNamingTheFile) {
  if (!fs::exists("/dev/full")) {
    GTEST_SKIP() << "no /dev/full here";
  }
  OutputFileOptions options;
  options.what = "--out";
  const Error error = error_of([&] { zeus::write_output_file("/dev/full", "x", options); });
  EXPECT_EQ(error.kind(), ErrorKind::kIo);
  EXPECT_TRUE(contains(error.what(), "--out \"/dev/full\": writing failed: No space left"))
      << error.what();
}

TEST(OutputFile, RefusesAnInputEvenThroughALinkAndLeavesItIntact) {
  const zeus::testing::TempDir dir("zeus-files-test");
  const fs::path input = dir.path() / "run.csv";
  write_plain(input, "timestamp,device\n");
  fs::create_symlink(input, dir.path() / "alias.csv");
  fs::create_hard_link(input, dir.path() / "hard.csv");
  for (const char* name : {"run.csv", "alias.csv", "hard.csv"}) {
    OutputFileOptions options;
    options.what = "--out";
    options.inputs = {dir.path() / "missing.csv", input};
    const Error error = error_of([&] { OutputFile file(dir.path() / name, options); });
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument) << name;
    EXPECT_TRUE(contains(error.what(), "is also an input (" + input.string() + ")"))
        << error.what();
  }
  EXPECT_EQ(read_plain(input), "timestamp,device\n");
  EXPECT_EQ(entries_in(dir.path()), 3u);
}

// Only a regular file can be destroyed: a device named as an input too (`--timeline /dev/null
// -o /dev/null`) is written through.
TEST(OutputFile, ADeviceThatIsAlsoAnInputIsWrittenThrough) {
  OutputFileOptions options;
  options.inputs = {"/dev/null"};
  OutputFile file("/dev/null", options);
  EXPECT_TRUE(file.writes_through());
  file.refuse_inputs({"/dev/null"});
  file.write("x");
  file.commit();
}

TEST(OutputFile, RefusesDirectoriesAndMissingParents) {
  const zeus::testing::TempDir dir("zeus-files-test");
  const Error directory = error_of([&] { OutputFile file(dir.path()); });
  EXPECT_EQ(directory.kind(), ErrorKind::kInvalidArgument);
  EXPECT_TRUE(contains(directory.what(), "is a directory; give the path of a file to write in it"))
      << directory.what();
  const Error parent = error_of([&] { OutputFile file(dir.path() / "no" / "out.html"); });
  EXPECT_EQ(parent.kind(), ErrorKind::kInvalidArgument);
  EXPECT_TRUE(contains(parent.what(), "does not exist")) << parent.what();
  OutputFileOptions options;
  options.create_parent_directories = true;
  zeus::write_output_file(dir.path() / "made" / "out.html", "x", options);
  EXPECT_EQ(read_plain(dir.path() / "made" / "out.html"), "x");
}

TEST(OutputFile, InPlaceKeepsWhatWasWrittenWithoutCommit) {
  const zeus::testing::TempDir dir("zeus-files-test");
  const fs::path out = dir.path() / "timeline.csv";
  write_plain(out, "a much longer old content");
  {
    OutputFileOptions options;
    options.replace_atomically = false;
    OutputFile file(out, options);
    file.stream() << "streamed";
  }
  EXPECT_EQ(read_plain(out), "streamed");
}

TEST(OutputFile, DescriptorsAreCloseOnExec) {
  const zeus::testing::TempDir dir("zeus-files-test");
  OutputFile file(dir.path() / "out.csv");
  int checked = 0;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    const fs::path to = fs::read_symlink(entry.path(), error);
    if (!error && to.parent_path() == dir.path()) {
      const int fd = std::stoi(entry.path().filename().string());
      EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1);
}

}  // namespace
