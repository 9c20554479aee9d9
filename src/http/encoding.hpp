// Response encoding for the HTTP host: the default JSON error body, and gzip for large text
// responses when the client accepts it (RFC 9110 12.5.3). Internal to the http layer.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "http/host.hpp"

namespace zeus::http::detail {

// {"detail": message} with the message's quotes and backslashes escaped, control and non-ASCII
// bytes replaced by '?'.
void default_error_body(int status, const std::string& message, Response& response);

// Whether an Accept-Encoding value accepts gzip ("gzip", "x-gzip" or "*" with q > 0).
bool accepts_gzip(std::string_view value);

// Whether a response of this content type is worth compressing (text, JSON, JavaScript).
bool compressible(std::string_view content_type);

// `input` gzip-compressed, or nullopt when zlib fails.
std::optional<std::string> gzip(const std::string& input);

}  // namespace zeus::http::detail
