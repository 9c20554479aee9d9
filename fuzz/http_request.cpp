// Bytes off a connection -> the HTTP host's request parser and checks (parse_request: Beast's
// parser with the host's limits, then check_head), exactly what the host runs. Each input is
// parsed with the default limits and with a few small ones, and the outcomes are checked against
// each other: a request accepted under small limits is accepted, identically, under larger ones.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz_check.hpp"
#include "http/request_reader.hpp"

namespace {

using zeus::http::HostLimits;
using zeus::http::Request;
using zeus::http::detail::ParseOutcome;

HostLimits limits(std::size_t header_bytes, std::size_t header_count, std::size_t body_bytes) {
  HostLimits out;
  out.max_header_bytes = header_bytes;
  out.max_header_count = header_count;
  out.max_body_bytes = body_bytes;
  return out;
}

bool is_token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// What holds for every outcome under `limits`.
void check_outcome(const ParseOutcome& outcome, const HostLimits& limits) {
  const int kinds =
      int{outcome.request.has_value()} + int{outcome.refusal.has_value()} + int{outcome.incomplete};
  ZEUS_FUZZ_CHECK(kinds == 1);
  if (outcome.refusal) {
    ZEUS_FUZZ_CHECK(outcome.refusal->status >= 400 && outcome.refusal->status <= 599);
    ZEUS_FUZZ_CHECK(!outcome.refusal->message.empty());
    return;
  }
  if (!outcome.request) {
    return;
  }
  const Request& request = *outcome.request;
  ZEUS_FUZZ_CHECK(!request.method.empty());
  ZEUS_FUZZ_CHECK(!request.path.empty() && request.path.front() == '/');
  ZEUS_FUZZ_CHECK(request.path.find('?') == std::string_view::npos);
  // target = path ['?' query]
  ZEUS_FUZZ_CHECK(request.target.starts_with(request.path));
  if (request.target.size() > request.path.size()) {
    ZEUS_FUZZ_CHECK(request.target[request.path.size()] == '?');
    ZEUS_FUZZ_CHECK(request.target.substr(request.path.size() + 1) == request.query);
  } else {
    ZEUS_FUZZ_CHECK(request.query.empty());
  }
  const auto params = zeus::http::parse_query(request.query);
  ZEUS_FUZZ_CHECK(params.has_value() && *params == request.params);
  ZEUS_FUZZ_CHECK(request.headers.size() <= limits.max_header_count);
  for (const auto& [name, value] : request.headers) {
    ZEUS_FUZZ_CHECK(!name.empty() && std::all_of(name.begin(), name.end(), is_token_char));
    ZEUS_FUZZ_CHECK(std::none_of(value.begin(), value.end(), [](char c) {
      const auto u = static_cast<unsigned char>(c);
      return (u < 0x20 && c != '\t') || u == 0x7f;
    }));
  }
  ZEUS_FUZZ_CHECK(request.body.size() <= limits.max_body_bytes);
  if (request.header("transfer-encoding")) {
    ZEUS_FUZZ_CHECK(!request.header("content-length").has_value());
  }
}

bool same_request(const Request& a, const Request& b) {
  return a.method == b.method && a.target == b.target && a.path == b.path && a.query == b.query &&
         a.params == b.params && a.headers == b.headers && a.body == b.body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const HostLimits defaults;
  const ParseOutcome full = zeus::http::detail::parse_request(bytes, defaults);
  check_outcome(full, defaults);

  // Each no larger than the defaults in any dimension.
  static const std::array<HostLimits, 4> kSmall = {limits(1, 0, 0), limits(64, 2, 0),
                                                   limits(256, 8, 16), limits(2048, 100, 1024)};
  for (const HostLimits& small : kSmall) {
    const ParseOutcome outcome = zeus::http::detail::parse_request(bytes, small);
    check_outcome(outcome, small);
    if (outcome.request) {
      ZEUS_FUZZ_CHECK(full.request.has_value());
      ZEUS_FUZZ_CHECK(same_request(*outcome.request, *full.request));
    }
  }
  return 0;
}
