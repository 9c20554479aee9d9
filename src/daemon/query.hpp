// zeusd's strict query-string parsing (serde's deny_unknown_fields and its error texts), apart
// from the routes so that the fuzz target runs exactly what serves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/host.hpp"

namespace zeus::daemon {

// An HTTP reply that ends a handler early.
struct HttpError {
  int status;
  std::string content_type;
  std::string body;
};

// {"error": message} as JSON.
HttpError json_error(int status, const std::string& message);
// actix's default extraction failure: 400 text/plain "Query deserialize error: ...".
HttpError query_error(const std::string& message);

// The query of one request, checked against the route's fields: an unknown or repeated field
// throws HttpError (400) at construction; the typed getters throw it for a missing or malformed
// value.
class Query {
 public:
  Query(const http::Request& req, std::vector<std::string_view> fields);
  std::optional<std::string> optional(const std::string& name) const;
  std::string required(const std::string& name) const;
  bool boolean(const std::string& name) const;
  std::uint32_t u32(const std::string& name) const;

 private:
  const http::Request& req_;
};

// "0,2,1" -> {0,1,2} (sorted, deduplicated). `kind` is "GPU" or "CPU". Throws HttpError (400).
std::vector<int> parse_ids(const std::string& field, const std::string& value,
                           std::string_view kind);

}  // namespace zeus::daemon
