// `zeusd token issue` (token_command.cpp): prints an HS256 token (auth.hpp) signed with the key
// of --signing-key-path (key_file.hpp).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string_view>

namespace zeus::daemon::auth {

// Parses an --expires-in duration: the common grammar (zeus::parse_duration_s in
// common/duration.hpp) narrowed to a positive integer with an optional unit, s (default), m, h
// or d ("3600", "90s", "30m", "1h", "7d"), at most 100 years. Throws zeus::Error
// (kInvalidArgument) otherwise.
std::int64_t parse_duration_s(std::string_view text);

// `zeusd token issue --signing-key-path F --sub NAME --scopes gpu-read,gpu-control
// [--expires-in 1h]`: prints the token and a newline to `out`. argv[0] is the command's name
// (e.g. "zeusd token issue"); the rest are its flags. Returns 0, or non-zero after writing the
// error (or --help) to `err`/`out`.
int run_token_issue(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                    std::int64_t now_s);
// The same with std::cout, std::cerr and the system clock.
int run_token_issue(int argc, const char* const* argv);

}  // namespace zeus::daemon::auth
