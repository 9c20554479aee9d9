// `zeusd token issue` (token_command.hpp): its flags, the --expires grammar, and the token it
// prints.
#include "daemon/token_command.hpp"

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/duration.hpp"
#include "daemon/auth.hpp"
#include "daemon/key_file.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon::auth {

std::int64_t parse_duration_s(std::string_view text) {
  auto fail = [&]() -> Error {
    return Error(ErrorKind::kInvalidArgument,
                 "invalid duration '" + std::string(text) +
                     "'; use a positive integer with an optional unit s, m, h or d, e.g. 3600, "
                     "30m, 1h, 7d");
  };
  // The common grammar (common/duration.hpp), narrowed to what `zeusd token issue` has always
  // taken: a whole number of seconds, minutes, hours or days, without blanks, sign or fraction.
  std::string_view count = text;
  if (!count.empty() && std::string_view("smhd").find(count.back()) != std::string_view::npos) {
    count.remove_suffix(1);
  }
  if (count.empty() || count.find_first_not_of("0123456789") != std::string_view::npos) {
    throw fail();
  }
  double seconds = 0.0;
  try {
    seconds = zeus::parse_duration_s(text, "--expires");
  } catch (const Error&) {
    throw fail();
  }
  if (seconds < 1.0) {
    throw fail();
  }
  // Cap at 100 years: anything longer is a typo, and it keeps now + duration from overflowing.
  constexpr std::int64_t kMaxDurationS = std::int64_t{100} * 365 * 86400;
  if (seconds > static_cast<double>(kMaxDurationS)) {
    throw Error(ErrorKind::kInvalidArgument,
                "duration '" + std::string(text) + "' is longer than 100 years");
  }
  return static_cast<std::int64_t>(seconds);
}

int run_token_issue(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                    std::int64_t now_s) {
  CLI::App app{"Issue an HS256 token for zeusd (printed to stdout)", "zeusd token issue"};
  std::string key_path;
  std::string sub;
  std::string scopes_text;
  std::string expires_in;
  app.add_option("--signing-key-path", key_path,
                 "The key file zeusd serve uses (mode 0600, at least 32 bytes)")
      ->required();
  // The reference's spellings (--user, --scope, --expires) and our earlier ones (--sub,
  // --scopes, --expires-in) are the same options.
  app.add_option("--user,--sub", sub,
                 "Who the token is for (its `sub` claim, logged with every "
                 "request)")
      ->required();
  app.add_option("--scope,--scopes", scopes_text,
                 "Comma-separated API groups the token may use: gpu-control, gpu-read, cpu-read")
      ->required();
  bool allow_weak_key = false;
  app.add_flag("--allow-weak-signing-key", allow_weak_key,
               "Take the key as the reference zeusd does (any non-empty file), with warnings");
  app.add_option("--expires,--expires-in", expires_in,
                 "Lifetime such as 3600, 30m, 1h, 7d or 30d; `never` or 0 (or omitted): the "
                 "token never expires");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err);
  }

  try {
    if (sub.empty()) {
      throw Error(ErrorKind::kInvalidArgument, "--user (--sub) must not be empty");
    }
    std::vector<ApiGroup> scopes = parse_api_group_list(scopes_text);
    std::optional<std::int64_t> exp_s;
    if (!expires_in.empty() && expires_in != "never" && expires_in != "0") {
      exp_s = now_s + parse_duration_s(expires_in);
    }
    SigningKey key = load_signing_key(key_path, allow_weak_key);
    out << issue_token(key, sub, scopes, exp_s) << '\n';
    return 0;
  } catch (const Error& e) {
    err << "zeusd token issue: " << e.what() << '\n';
    return 2;
  }
}

int run_token_issue(int argc, const char* const* argv) {
  return run_token_issue(argc, argv, std::cout, std::cerr,
                         static_cast<std::int64_t>(system_clock()->now_s()));
}

}  // namespace zeus::daemon::auth
