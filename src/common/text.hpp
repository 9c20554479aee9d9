// Text handling shared by every layer: trimming, splitting lists, reading a whole file, hashing
// names. One home for each, so that the rules (which blanks are trimmed, whether empty pieces are
// kept) are the same everywhere. CSV files are read with common/csv.hpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::text {

// Blanks: space, tab, carriage return and newline.
inline constexpr std::string_view kBlanks = " \t\r\n";

// `text` without the leading and trailing characters in `chars`.
std::string_view trim(std::string_view text, std::string_view chars = kBlanks);

// `text` with A-Z lowered, every other byte as it is: for names, schemes and hex digits, which
// are ASCII, whatever locale the process runs in (Python sets LC_CTYPE from the environment,
// where std::tolower on its own would follow it).
std::string ascii_lower(std::string_view text);
// Whether `a` and `b` are the same but for the case of A-Z.
bool ascii_iequals(std::string_view a, std::string_view b);

// Whether `given` and `secret` are equal, in time that depends only on the length of `given`:
// neither where the contents differ nor the secret's length shows (for tokens and signatures).
bool constant_time_equal(std::string_view given, std::string_view secret);

// The pieces of `text` between each `separator`, empty pieces kept: "a,,b" -> {"a", "", "b"},
// "" -> {""}. The views point into `text`.
std::vector<std::string_view> split(std::string_view text, char separator);

// The pieces of `text` between each `separator`, each trimmed of `chars`; with `drop_empty`, the
// pieces left empty are dropped ("a, ,b," -> {"a", "b"}).
std::vector<std::string_view> split_trimmed(std::string_view text, char separator,
                                            bool drop_empty = false,
                                            std::string_view chars = kBlanks);

// As split_trimmed, but owning the pieces.
std::vector<std::string> split_to_strings(std::string_view text, char separator,
                                          bool drop_empty = false,
                                          std::string_view chars = kBlanks);

// The whole file, byte for byte. Throws Error naming the file: kNoPermission (EACCES, EPERM),
// kNotFound (ENOENT, ENOTDIR), kInvalidArgument when the path is not a regular file (a directory,
// FIFO, device or socket: refused without blocking) or kIo. `description` names the kind of file
// in the errors ("cannot read the trace file X: ..."); empty: "cannot read X: ...".
std::string read_file(const std::filesystem::path& path, std::string_view description = {});
// Throws as read_file() does unless `path` is a regular file that can be opened for reading; for
// readers that stream a file instead of reading it whole.
void require_regular_file(const std::filesystem::path& path, std::string_view description = {});

// `text` without a leading UTF-8 byte-order mark (spreadsheets write one before a CSV header).
std::string_view without_utf8_bom(std::string_view text);

// A JSON library message (nlohmann's what()) without its "[json.exception.type_error.302] "
// identifier, for error messages meant for users: "type must be number, but is string".
std::string_view json_error_text(std::string_view what);

// FNV-1a hashes (32 and 64 bits), for stable, seedable names-to-numbers (simulated UUIDs,
// deterministic noise). Not for security.
template <typename Hash>
constexpr Hash fnv1a(std::string_view text, Hash offset_basis, Hash prime) {
  Hash hash = offset_basis;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= prime;
  }
  return hash;
}
constexpr std::uint32_t fnv1a_32(std::string_view text) {
  return fnv1a<std::uint32_t>(text, 2166136261U, 16777619U);
}
constexpr std::uint64_t fnv1a_64(std::string_view text) {
  return fnv1a<std::uint64_t>(text, 14695981039346656037ULL, 1099511628211ULL);
}

}  // namespace zeus::text
