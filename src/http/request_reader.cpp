#include "request_reader.hpp"

#include <algorithm>

#include "common/text.hpp"

namespace zeus::http::detail {
namespace beast_http = boost::beast::http;

void configure(RequestParser& parser, const HostLimits& limits) {
  parser.header_limit(static_cast<std::uint32_t>(
      std::min<std::size_t>(limits.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
  parser.body_limit(limits.max_body_bytes);
}

Refusal refusal_for(const boost::system::error_code& code, const HostLimits& limits) {
  using beast_http::error;
  if (code == error::header_limit || code == error::buffer_overflow) {
    return {431, "the request head is larger than " + std::to_string(limits.max_header_bytes) +
                     " bytes"};
  }
  if (code == error::body_limit) {
    return {413, "Request body too large: the limit is " + std::to_string(limits.max_body_bytes) +
                     " bytes (chunked bodies included)"};
  }
  if (code == error::bad_method) {
    return {400, "malformed request line: bad method"};
  }
  if (code == error::bad_target) {
    return {400, "malformed request line: bad target"};
  }
  if (code == error::bad_version) {
    return {400, "malformed request line: bad HTTP version"};
  }
  if (code == error::bad_line_ending) {
    return {400, "malformed request: lines must end with CRLF"};
  }
  if (code == error::bad_field) {
    return {400, "malformed header line (a header needs a name, a colon and a value)"};
  }
  if (code == error::bad_value) {
    return {400, "malformed header value (control characters are not allowed)"};
  }
  if (code == error::bad_obs_fold) {
    return {400, "malformed header: obsolete line folding"};
  }
  if (code == error::bad_content_length) {
    return {400, "invalid Content-Length (a decimal number, and not with Transfer-Encoding)"};
  }
  if (code == error::multiple_content_length) {
    return {400, "conflicting Content-Length headers"};
  }
  if (code == error::bad_transfer_encoding) {
    return {400, "invalid Transfer-Encoding (only one \"chunked\", and not with Content-Length)"};
  }
  if (code == error::bad_chunk || code == error::bad_chunk_extension) {
    return {400, "malformed chunked body"};
  }
  if (code == error::partial_message || code == error::short_read) {
    return {400, "the request ended early"};
  }
  return {400, "malformed request"};
}

namespace {

bool is_token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

}  // namespace

std::optional<Refusal> check_head(const RequestParser::value_type& head, const HostLimits& limits,
                                  Request& out) {
  if (head.version() != 11 && head.version() != 10) {
    return Refusal{505, "only HTTP/1.0 and HTTP/1.1 are served"};
  }
  std::size_t count = 0;
  std::size_t hosts = 0;
  out.headers.clear();
  for (const auto& field : head.base()) {
    if (++count > limits.max_header_count) {
      return Refusal{431, "the request has more than " + std::to_string(limits.max_header_count) +
                              " header fields"};
    }
    const std::string_view name = field.name_string();
    const std::string_view value = field.value();
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_token_char)) {
      return Refusal{400, "malformed header name"};
    }
    if (std::any_of(value.begin(), value.end(), [](char c) {
          const auto u = static_cast<unsigned char>(c);
          return (u < 0x20 && c != '\t') || u == 0x7f;
        })) {
      return Refusal{400, "malformed header value (control characters are not allowed)"};
    }
    if (field.name() == beast_http::field::host) {
      ++hosts;
    }
    out.headers.emplace_back(text::ascii_lower(name), std::string(value));
  }
  if (hosts > 1) {
    return Refusal{400, "more than one Host header"};
  }

  if (const auto te = out.header("transfer-encoding")) {
    if (!iequals(text::trim(*te, kOptionalWhitespace), "chunked")) {
      return Refusal{501, "Transfer-Encoding \"" + std::string(*te) +
                              "\" is not supported (send the body as is, or \"chunked\")"};
    }
  }
  if (const auto ce = out.header("content-encoding")) {
    if (!iequals(text::trim(*ce, kOptionalWhitespace), "identity")) {
      return Refusal{415, "compressed request bodies (Content-Encoding: " + std::string(*ce) +
                              ") are not accepted; send the body uncompressed"};
    }
  }

  out.method = std::string(head.method_string());
  out.target = std::string(head.target());
  if (out.target.empty() || out.target.front() != '/') {
    return Refusal{400, "the request target must be a path starting with '/'"};
  }
  const std::size_t question = out.target.find('?');
  out.path = out.target.substr(0, question);
  out.query = question == std::string::npos ? std::string() : out.target.substr(question + 1);
  auto params = parse_query(out.query);
  if (!params) {
    return Refusal{400, "malformed query string (a '%' must be followed by two hex digits)"};
  }
  out.params = std::move(*params);
  return std::nullopt;
}

bool expects_continue(const RequestParser::value_type& head) {
  const auto it = head.find(beast_http::field::expect);
  return it != head.end() && iequals(text::trim(it->value(), kOptionalWhitespace), "100-continue");
}

ParseOutcome parse_request(std::string_view bytes, const HostLimits& limits) {
  ParseOutcome outcome;
  RequestParser parser;
  configure(parser, limits);
  parser.eager(false);
  boost::system::error_code error;
  std::size_t used = 0;
  while (!parser.is_header_done()) {
    const std::size_t n =
        parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), error);
    used += n;
    if (error == beast_http::error::need_more || (!error && n == 0)) {
      outcome.incomplete = true;
      return outcome;
    }
    if (error) {
      outcome.refusal = refusal_for(error, limits);
      return outcome;
    }
  }
  Request request;
  if (auto refusal = check_head(parser.get(), limits, request)) {
    outcome.refusal = std::move(refusal);
    return outcome;
  }
  parser.eager(true);
  while (!parser.is_done()) {
    if (used == bytes.size()) {
      outcome.incomplete = true;
      return outcome;
    }
    const std::size_t n =
        parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), error);
    used += n;
    if (error == beast_http::error::need_more) {
      outcome.incomplete = true;
      return outcome;
    }
    if (error) {
      outcome.refusal = refusal_for(error, limits);
      return outcome;
    }
    if (n == 0) {
      outcome.incomplete = true;
      return outcome;
    }
  }
  request.body = std::move(parser.get().body());
  outcome.request = std::move(request);
  return outcome;
}

}  // namespace zeus::http::detail
