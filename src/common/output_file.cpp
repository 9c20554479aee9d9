#include "common/output_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <streambuf>
#include <system_error>

#include "zeus/common/error.hpp"

namespace zeus {
namespace {

namespace fs = std::filesystem;

// (fmt rather than operator+: GCC 12 at -O3 wrongly warns of overlapping copies in the latter.)
std::string quoted(const fs::path& path) {
  return fmt::format("\"{}\"", path.string());
}

[[noreturn]] void fail_errno(const OutputFileOptions& options, const fs::path& path,
                             std::string_view doing, int err) {
  const std::string message = options.what + " " + quoted(path) + ": cannot " + std::string(doing) +
                              ": " + std::strerror(err);
  if (err == EACCES || err == EPERM || err == EROFS) {
    throw Error(ErrorKind::kNoPermission, message);
  }
  if (err == ENOTDIR || err == ELOOP || err == ENAMETOOLONG || err == EISDIR) {
    throw Error(ErrorKind::kInvalidArgument, message);
  }
  throw Error(ErrorKind::kIo, message);
}

// Buffered output to a descriptor; the first failed write(2) is kept for commit() to report.
class FdStreamBuf : public std::streambuf {
 public:
  explicit FdStreamBuf(int fd) : fd_(fd), buffer_(1 << 16) { reset(); }

  int error() const { return error_; }
  bool flush_all() { return drain(); }

 protected:
  int_type overflow(int_type ch) override {
    if (!drain()) {
      return traits_type::eof();
    }
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  void reset() { setp(buffer_.data(), buffer_.data() + buffer_.size()); }

  bool drain() {
    const char* from = pbase();
    const char* const to = pptr();
    while (from < to && error_ == 0) {
      const ssize_t wrote = ::write(fd_, from, static_cast<std::size_t>(to - from));
      if (wrote < 0) {
        if (errno != EINTR) {
          error_ = errno;
        }
        continue;
      }
      from += wrote;
    }
    reset();
    return error_ == 0;
  }

  int fd_;
  std::vector<char> buffer_;
  int error_ = 0;
};

// A name for the temporary beside `target` that no other zeus process picks: hidden, with the
// pid and a process-wide counter.
fs::path temporary_beside(const fs::path& target, unsigned attempt) {
  static std::atomic<unsigned> counter{0};
  const unsigned n = counter.fetch_add(1) + attempt;
  fs::path name =
      target.parent_path() / fmt::format(".{}.zeus-tmp-{}-{}", target.filename().string(),
                                         static_cast<long>(::getpid()), n);
  return name;
}

// `path` with every symbolic link on its last component followed, also a dangling one (whose
// target is then the file to create).
fs::path follow_links(const fs::path& path, const OutputFileOptions& options) {
  fs::path current = path;
  for (int hops = 0;; ++hops) {
    struct stat info {};
    if (::lstat(current.c_str(), &info) != 0 || !S_ISLNK(info.st_mode)) {
      return current;
    }
    if (hops == 40) {
      fail_errno(options, path, "follow its symbolic links", ELOOP);
    }
    std::error_code error;
    const fs::path to = fs::read_symlink(current, error);
    if (error) {
      fail_errno(options, path, "follow its symbolic link", error.value());
    }
    current = to.is_absolute() ? to : current.parent_path() / to;
  }
}

// Throws when the file `info` describes is one of `inputs`.
void refuse_same_file(const struct stat& info, const fs::path& path,
                      const std::vector<fs::path>& inputs, const OutputFileOptions& options) {
  if (!S_ISREG(info.st_mode)) {
    return;  // a device or FIFO is written through, never destroyed: two outputs may share one
  }
  for (const fs::path& input : inputs) {
    struct stat input_info {};
    if (::stat(input.c_str(), &input_info) == 0 && input_info.st_dev == info.st_dev &&
        input_info.st_ino == info.st_ino) {
      throw Error(ErrorKind::kInvalidArgument,
                  options.what + " " + quoted(path) + " is also an input (" + input.string() +
                      "); writing it would destroy the input, so write to another file");
    }
  }
}

}  // namespace

struct OutputFile::State {
  OutputFileOptions options;
  fs::path target;
  fs::path temporary;  // empty unless replacing atomically
  int fd = -1;
  bool through = false;
  bool committed = false;
  std::unique_ptr<FdStreamBuf> buffer;
  std::unique_ptr<std::ostream> stream;

  ~State() {
    if (fd >= 0) {
      if (buffer && !committed && temporary.empty()) {
        buffer->flush_all();  // in place or through: keep what was written
      }
      ::close(fd);
    }
    if (!committed && !temporary.empty()) {
      ::unlink(temporary.c_str());
    }
  }
};

OutputFile::OutputFile(const fs::path& path, OutputFileOptions options)
    : state_(std::make_unique<State>()) {
  State& state = *state_;
  state.options = std::move(options);
  const OutputFileOptions& opts = state.options;
  if (path.empty()) {
    throw Error(ErrorKind::kInvalidArgument, opts.what + ": the path is empty; give a file name");
  }

  struct stat info {};
  const bool exists = ::stat(path.c_str(), &info) == 0;
  if (!exists && errno != ENOENT) {
    fail_errno(opts, path, "look it up", errno);
  }
  if (exists) {
    if (S_ISDIR(info.st_mode)) {
      throw Error(ErrorKind::kInvalidArgument,
                  opts.what + " " + quoted(path) +
                      " is a directory; give the path of a file to write in it, e.g. " +
                      quoted(path / "<name>"));
    }
    if (S_ISBLK(info.st_mode) || S_ISSOCK(info.st_mode)) {
      throw Error(ErrorKind::kInvalidArgument,
                  opts.what + " " + quoted(path) + " is a " +
                      (S_ISBLK(info.st_mode) ? "block device" : "socket") +
                      "; zeus writes only to files, character devices and pipes");
    }
    refuse_same_file(info, path, opts.inputs, opts);
  }

  if (exists && (S_ISCHR(info.st_mode) || S_ISFIFO(info.st_mode))) {
    // A device or pipe: written through, never truncated or replaced.
    state.target = path;
    state.through = true;
    state.fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (state.fd < 0) {
      fail_errno(opts, path, "open it for writing", errno);
    }
  } else {
    // A regular file (or a new one), behind any symbolic links: the file they point to is the one
    // written, and the links stay.
    std::error_code error;
    state.target = follow_links(path, opts);
    const fs::path parent =
        state.target.has_parent_path() ? state.target.parent_path() : fs::path(".");
    struct stat parent_info {};
    if (::stat(parent.c_str(), &parent_info) != 0 || !S_ISDIR(parent_info.st_mode)) {
      if (!opts.create_parent_directories) {
        throw Error(ErrorKind::kInvalidArgument, opts.what + " " + quoted(path) +
                                                     ": the directory " + parent.string() +
                                                     " does not exist; create it first");
      }
      fs::create_directories(parent, error);
      if (error) {
        throw Error(ErrorKind::kIo, opts.what + " " + quoted(path) + ": cannot create " +
                                        parent.string() + ": " + error.message());
      }
    }
    if (opts.replace_atomically) {
      for (unsigned attempt = 0; state.fd < 0; ++attempt) {
        state.temporary = temporary_beside(state.target, attempt);
        state.fd = ::open(state.temporary.c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
        if (state.fd < 0 && (errno != EEXIST || attempt >= 100)) {
          const int err = errno;
          state.temporary.clear();
          fail_errno(opts, path, "create a file beside it", err);
        }
      }
      if (exists) {
        ::fchmod(state.fd, info.st_mode & 07777);  // the new content keeps the old permissions
      }
    } else {
      state.fd =
          ::open(state.target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
      if (state.fd < 0) {
        fail_errno(opts, path, "open it for writing", errno);
      }
    }
  }
  state.buffer = std::make_unique<FdStreamBuf>(state.fd);
  state.stream = std::make_unique<std::ostream>(state.buffer.get());
}

OutputFile::~OutputFile() = default;
OutputFile::OutputFile(OutputFile&&) noexcept = default;
OutputFile& OutputFile::operator=(OutputFile&&) noexcept = default;

std::ostream& OutputFile::stream() {
  return *state_->stream;
}

void OutputFile::write(std::string_view data) {
  std::ostream& out = stream();
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) {
    const int err = state_->buffer->error();
    throw Error(ErrorKind::kIo, state_->options.what + " " + quoted(state_->target) +
                                    ": writing failed: " + std::strerror(err != 0 ? err : EIO));
  }
}

void OutputFile::commit() {
  State& state = *state_;
  if (state.committed) {
    return;
  }
  state.stream->flush();
  int err = state.buffer->error();
  if (err == 0 && !*state.stream) {
    err = EIO;
  }
  const int fd = state.fd;
  state.fd = -1;
  if (::close(fd) != 0 && err == 0 && errno != EINTR) {
    err = errno;
  }
  if (err == 0 && !state.temporary.empty() &&
      ::rename(state.temporary.c_str(), state.target.c_str()) != 0) {
    err = errno;
  }
  if (err != 0) {
    if (!state.temporary.empty()) {
      ::unlink(state.temporary.c_str());
      state.temporary.clear();
    }
    state.committed = true;
    throw Error(ErrorKind::kIo, state.options.what + " " + quoted(state.target) +
                                    ": writing failed: " + std::strerror(err));
  }
  state.committed = true;
}

void OutputFile::refuse_inputs(const std::vector<fs::path>& inputs) const {
  struct stat info {};
  if (::stat(state_->target.c_str(), &info) == 0) {
    refuse_same_file(info, state_->target, inputs, state_->options);
  }
}

const fs::path& OutputFile::target() const {
  return state_->target;
}

bool OutputFile::writes_through() const {
  return state_->through;
}

void write_output_file(const fs::path& path, std::string_view content, OutputFileOptions options) {
  OutputFile file(path, std::move(options));
  file.write(content);
  file.commit();
}

}  // namespace zeus
