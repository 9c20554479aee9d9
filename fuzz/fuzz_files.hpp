// What the targets of file parsers share: a scratch directory per fuzzing process (the parsers
// take paths, not text), a way to put the input in a file there, and splitting one input into
// the parts that go to different files.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "common/temp_dir.hpp"

namespace zeus::fuzz {

inline constexpr std::string_view kScratchPrefix = "zeus-fuzz-files-";

// A crashing input ends the process without destructors, leaving its scratch directory behind:
// those of processes that no longer exist are removed (each name carries its process's id).
inline void remove_stale_scratch_dirs() {
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::temp_directory_path(), error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kScratchPrefix, 0) != 0) {
      continue;
    }
    const long pid = std::strtol(name.c_str() + kScratchPrefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::filesystem::remove_all(entry.path(), error);
    }
  }
}

// Created on first use under $TMPDIR (point it at /dev/shm for speed) and removed when the
// process exits normally; one per process, so that parallel fuzzers (-jobs=N) never share files.
inline const std::filesystem::path& scratch_dir() {
  static const TempDir dir = [] {
    remove_stale_scratch_dirs();
    return TempDir(std::string(kScratchPrefix) + std::to_string(::getpid()));
  }();
  return dir.path();
}

// Replaces `path` with `data`, byte for byte. A failure here is the harness's, not the parser's:
// it aborts with a message rather than letting the parser see a half-written file.
inline void write_file(const std::filesystem::path& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// The pieces of `data` between NUL bytes, at most `count` of them (the last keeps any further
// NULs); missing pieces are empty. None of the text formats fuzzed here contains a NUL, so it
// is a separator the mutator can insert and delete in one step.
inline std::vector<std::string_view> split_parts(std::string_view data, std::size_t count) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < count) {
    const std::size_t nul = data.find('\0');
    if (nul == std::string_view::npos) {
      break;
    }
    parts.push_back(data.substr(0, nul));
    data.remove_prefix(nul + 1);
  }
  parts.push_back(data);
  parts.resize(count);
  return parts;
}

// Silences the library's logger (ZEUS_LOG_LEVEL, read once, on first use): warnings about odd
// input are expected here, and printing one per input would slow every run down.
inline void quiet_logs() {
  setenv("ZEUS_LOG_LEVEL", "off", 1);
}

}  // namespace zeus::fuzz
