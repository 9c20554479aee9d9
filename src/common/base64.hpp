// base64url (RFC 4648 §5): the one codec for zeusd's tokens (unpadded) and the Pushgateway's
// "@base64" label values (padded).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zeus {

enum class Base64Padding {
  kNone,    // JWTs (RFC 7515): "f" -> "Zg"
  kPadded,  // to a multiple of 4 with '=': "f" -> "Zg=="
};

// `bytes` in the URL-safe alphabet ('-' and '_' for '+' and '/'). Empty bytes are "" either way.
std::string base64url_encode(std::string_view bytes, Base64Padding padding = Base64Padding::kNone);

// Decodes unpadded base64url. nullopt on any character outside the alphabet (including '='), an
// impossible length, or non-zero trailing bits (so every byte string has one encoding).
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace zeus
