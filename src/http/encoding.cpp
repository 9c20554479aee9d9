#include "http/encoding.hpp"

#include <zlib.h>

#include "common/text.hpp"

namespace zeus::http::detail {

void default_error_body(int status, const std::string& message, Response& response) {
  response.status = status;
  response.content_type = "application/json";
  std::string escaped;
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      escaped += '\\';
      escaped += c;
    } else if (u < 0x20 || u >= 0x7f) {
      // Host messages are ASCII; anything else is replaced rather than risk invalid JSON.
      escaped += '?';
    } else {
      escaped += c;
    }
  }
  response.body = "{\"detail\":\"" + escaped + "\"}";
}

// Whether an Accept-Encoding value accepts gzip (RFC 9110 12.5.3: "gzip" or "*", q > 0).
bool accepts_gzip(std::string_view value) {
  bool star = false;
  bool gzip = false;
  bool gzip_listed = false;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t end = value.find(',', start);
    if (end == std::string_view::npos) {
      end = value.size();
    }
    std::string_view item = value.substr(start, end - start);
    start = end + 1;
    const std::size_t semicolon = item.find(';');
    const std::string_view coding = text::trim(item.substr(0, semicolon), " \t");
    bool positive = true;
    if (semicolon != std::string_view::npos) {
      const std::string_view parameter = text::trim(item.substr(semicolon + 1), " \t");
      if (parameter.size() >= 2 && (parameter[0] == 'q' || parameter[0] == 'Q') &&
          parameter[1] == '=') {
        const std::string_view q = parameter.substr(2);
        positive = !q.empty() && q.find_first_not_of("0.") != std::string_view::npos;
      }
    }
    if (iequals(coding, "gzip") || iequals(coding, "x-gzip")) {
      gzip_listed = true;
      gzip = positive;
    } else if (coding == "*") {
      star = positive;
    }
  }
  return gzip_listed ? gzip : star;
}

bool compressible(std::string_view content_type) {
  return content_type.rfind("text/", 0) == 0 || content_type.rfind("application/json", 0) == 0 ||
         content_type.rfind("application/javascript", 0) == 0;
}

std::optional<std::string> gzip(const std::string& input) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return std::nullopt;
  }
  std::string out(deflateBound(&stream, static_cast<uLong>(input.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
  stream.avail_in = static_cast<uInt>(input.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&stream, Z_FINISH);
  const std::size_t written = stream.total_out;
  deflateEnd(&stream);
  if (rc != Z_STREAM_END) {
    return std::nullopt;
  }
  out.resize(written);
  return out;
}

}  // namespace zeus::http::detail
