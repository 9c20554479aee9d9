#include "common/base64.hpp"

#include <cstdint>

namespace zeus {
namespace {

constexpr std::string_view kBase64UrlAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int value_of(char c) {
  if (c >= 'A' && c <= 'Z') {
    return c - 'A';
  }
  if (c >= 'a' && c <= 'z') {
    return c - 'a' + 26;
  }
  if (c >= '0' && c <= '9') {
    return c - '0' + 52;
  }
  if (c == '-') {
    return 62;
  }
  if (c == '_') {
    return 63;
  }
  return -1;
}

}  // namespace

std::string base64url_encode(std::string_view bytes, Base64Padding padding) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  auto byte = [&](std::size_t k) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[k]));
  };
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out += kBase64UrlAlphabet[(v >> 18) & 63];
    out += kBase64UrlAlphabet[(v >> 12) & 63];
    out += kBase64UrlAlphabet[(v >> 6) & 63];
    out += kBase64UrlAlphabet[v & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest == 0) {
    return out;
  }
  std::uint32_t v = byte(i) << 16;
  if (rest == 2) {
    v |= byte(i + 1) << 8;
  }
  out += kBase64UrlAlphabet[(v >> 18) & 63];
  out += kBase64UrlAlphabet[(v >> 12) & 63];
  if (rest == 2) {
    out += kBase64UrlAlphabet[(v >> 6) & 63];
  }
  if (padding == Base64Padding::kPadded) {
    out.append(3 - rest, '=');
  }
  return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
  if (text.size() % 4 == 1) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t accumulator = 0;
  int bits = 0;
  for (const char c : text) {
    const int v = value_of(c);
    if (v < 0) {
      return std::nullopt;
    }
    accumulator = (accumulator << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((accumulator >> bits) & 0xFF);
    }
  }
  // Leftover bits (2 or 4) must be zero, or a second encoding of the same bytes would exist.
  if (bits > 0 && (accumulator & ((1u << bits) - 1)) != 0) {
    return std::nullopt;
  }
  return out;
}

}  // namespace zeus
