// Writing a file the user named on the command line, without destroying anything they did not
// name. The rules (docs/cli.md, "Output files"):
//
// - A path that resolves to a character device or a FIFO (/dev/null, /dev/stdout, a terminal, a
//   pipe a reader waits on) is written through: opened for writing, never truncated, removed or
//   replaced. A directory, block device or socket is refused.
// - A symbolic link is followed: the file it points to is written, the link stays.
// - A regular file, or a new one, is written to a temporary sibling and renamed over the target
//   on commit(), so that a failed or interrupted write leaves the old content (and a new file
//   keeps the old one's permissions). With replace_atomically = false it is truncated and written
//   in place instead (a log streamed while a command runs, which must survive zeus being killed).
// - An output that is one of the inputs (the same file, by device and inode) is refused before
//   anything is opened for writing.
//
// Every descriptor is opened with O_CLOEXEC, so a command zeus starts never inherits it.
#pragma once

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace zeus {

struct OutputFileOptions {
  // Names the output in errors, e.g. "--out".
  std::string what = "the output file";
  // See above; false: truncate and write in place.
  bool replace_atomically = true;
  // Files the output must not be (refused with kInvalidArgument, naming the input). Paths that do
  // not exist are ignored.
  std::vector<std::filesystem::path> inputs;
  // Creates missing parent directories; otherwise a missing directory is an error.
  bool create_parent_directories = false;
};

class OutputFile {
 public:
  // Opens `path` for writing by the rules above. Throws Error: kInvalidArgument (a directory, block
  // device or socket; one of the inputs; a missing parent directory), kNoPermission, kIo.
  explicit OutputFile(const std::filesystem::path& path, OutputFileOptions options = {});
  // Without commit(): a temporary is removed and the target keeps its old content; in-place and
  // write-through outputs keep what was written.
  ~OutputFile();
  OutputFile(OutputFile&&) noexcept;
  OutputFile& operator=(OutputFile&&) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Buffered writes to the file. A failed write sets the stream's badbit; commit() reports it.
  std::ostream& stream();
  // Writes `data` at once (through stream()). Throws Error(kIo) when it fails.
  void write(std::string_view data);
  // Flushes, then puts a temporary in place of the target. Throws Error(kIo) naming the file when
  // anything written failed (the temporary is removed then, and the target left as it was).
  void commit();

  // Throws Error(kInvalidArgument) naming the input when the target is one of `inputs` (the
  // options' inputs are checked at construction; this is for inputs known only later, such as
  // the files inside a directory given as input). Paths that do not exist are ignored.
  void refuse_inputs(const std::vector<std::filesystem::path>& inputs) const;

  // The file written: the target after following symbolic links.
  const std::filesystem::path& target() const;
  // Whether the target is a device or FIFO written through.
  bool writes_through() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Writes `content` to `path` by the rules above and commits.
void write_output_file(const std::filesystem::path& path, std::string_view content,
                       OutputFileOptions options = {});

}  // namespace zeus
