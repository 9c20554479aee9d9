// Text a client controls in a request-target or a header -> the HTTP host's text helpers
// (http/host.hpp): parse_query, percent_decode, bearer_token, iequals, and the UTF-8 checks
// (common/utf8.hpp) that routes apply to decoded text. Each is checked against a small
// independent model. Two lists: checks of raw bytes, and checks of the parameters of every query
// that parses, including zeusd's own query parser (src/daemon/query.hpp).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/utf8.hpp"
#include "daemon/query.hpp"
#include "fuzz_check.hpp"
#include "http/host.hpp"

namespace {

using zeus::http::Fields;

// ---- Models -------------------------------------------------------------------------------

int hex_digit(char c) {
  const std::string_view digits = "0123456789abcdef";
  const char lower = (c >= 'A' && c <= 'F') ? static_cast<char>(c - 'A' + 'a') : c;
  const std::size_t at = digits.find(lower);
  return at == std::string_view::npos ? -1 : static_cast<int>(at);
}

std::optional<std::string> model_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      if (text.size() - i < 3 || hex_digit(text[i + 1]) < 0 || hex_digit(text[i + 2]) < 0) {
        return std::nullopt;
      }
      out += static_cast<char>(hex_digit(text[i + 1]) * 16 + hex_digit(text[i + 2]));
      i += 2;
    } else {
      out += (plus_is_space && text[i] == '+') ? ' ' : text[i];
    }
  }
  return out;
}

// Escapes everything but unreserved characters, so that decoding gives `text` back.
std::string encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    }
  }
  return out;
}

// Decodes code points one by one and checks each against RFC 3629: shortest form, no
// surrogates, at most U+10FFFF.
bool model_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    int extra = 0;
    std::uint32_t code = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      extra = 1;
      code = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      extra = 2;
      code = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      extra = 3;
      code = lead & 0x07;
    } else {
      return false;
    }
    if (text.size() - i <= static_cast<std::size_t>(extra)) {
      return false;
    }
    for (int k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
      if ((next & 0xC0) != 0x80) {
        return false;
      }
      code = (code << 6) | (next & 0x3F);
    }
    static constexpr std::array<std::uint32_t, 4> kSmallest = {0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[static_cast<std::size_t>(extra)] || code > 0x10FFFF ||
        (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += static_cast<std::size_t>(extra) + 1;
  }
  return true;
}

bool is_space(char c) {
  return c == ' ' || c == '\t';
}

// ---- Checks of raw bytes ------------------------------------------------------------------

void check_percent_decode(std::string_view input) {
  for (const bool plus : {false, true}) {
    const auto decoded = zeus::http::percent_decode(input, plus);
    ZEUS_FUZZ_CHECK(decoded == model_decode(input, plus));
  }
  const auto round_trip = zeus::http::percent_decode(encode(input), true);
  ZEUS_FUZZ_CHECK(round_trip.has_value() && *round_trip == input);
}

void check_parse_query(std::string_view input) {
  const auto params = zeus::http::parse_query(input);
  // Model: the non-empty '&'-separated items, each split at its first '=', both sides decoded.
  Fields expected;
  bool malformed = false;
  std::size_t start = 0;
  while (start <= input.size()) {
    const std::size_t amp = std::min(input.find('&', start), input.size());
    const std::string_view item = input.substr(start, amp - start);
    if (!item.empty()) {
      const std::size_t eq = item.find('=');
      const auto key = model_decode(item.substr(0, eq), true);
      const auto value = model_decode(
          eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1), true);
      if (!key || !value) {
        malformed = true;
        break;
      }
      expected.emplace_back(*key, *value);
    }
    start = amp + 1;
  }
  ZEUS_FUZZ_CHECK(params.has_value() == !malformed);
  if (!params) {
    return;
  }
  ZEUS_FUZZ_CHECK(*params == expected);
  // Encoded again, the parameters parse to themselves.
  std::string again;
  for (const auto& [key, value] : *params) {
    again += (again.empty() ? "" : "&") + encode(key) + "=" + encode(value);
  }
  const auto reparsed = zeus::http::parse_query(again);
  ZEUS_FUZZ_CHECK(reparsed.has_value() && *reparsed == *params);
}

void check_utf8(std::string_view input) {
  const bool valid = model_valid_utf8(input);
  ZEUS_FUZZ_CHECK(zeus::is_valid_utf8(input) == valid);
  const std::size_t bad = zeus::first_invalid_utf8(input);
  ZEUS_FUZZ_CHECK((bad == std::string_view::npos) == valid);
  if (!valid) {
    ZEUS_FUZZ_CHECK(bad < input.size());
    ZEUS_FUZZ_CHECK(model_valid_utf8(input.substr(0, bad)));
  }
  const std::string cleaned = zeus::to_valid_utf8(input);
  ZEUS_FUZZ_CHECK(model_valid_utf8(cleaned));
  if (valid) {
    ZEUS_FUZZ_CHECK(cleaned == input);
  } else {
    ZEUS_FUZZ_CHECK(cleaned.substr(0, bad) == input.substr(0, bad));
  }
}

void check_bearer_token(std::string_view input) {
  const auto token = zeus::http::bearer_token(input);
  std::size_t start = 0;
  while (start < input.size() && is_space(input[start])) {
    ++start;
  }
  const std::string_view rest = input.substr(start);
  const bool scheme =
      rest.size() > 6 && zeus::http::iequals(rest.substr(0, 6), "bearer") && is_space(rest[6]);
  if (!scheme) {
    ZEUS_FUZZ_CHECK(!token.has_value());
    return;
  }
  std::string_view expected = rest.substr(7);
  while (!expected.empty() && is_space(expected.front())) {
    expected.remove_prefix(1);
  }
  while (!expected.empty() && is_space(expected.back())) {
    expected.remove_suffix(1);
  }
  ZEUS_FUZZ_CHECK(token.has_value() == !expected.empty());
  if (token) {
    ZEUS_FUZZ_CHECK(*token == expected);
    // A view into the header, not a copy.
    ZEUS_FUZZ_CHECK(token->data() >= input.data() &&
                    token->data() + token->size() <= input.data() + input.size());
  }
}

void check_iequals(std::string_view input) {
  const std::string_view a = input.substr(0, input.size() / 2);
  const std::string_view b = input.substr(input.size() / 2);
  ZEUS_FUZZ_CHECK(zeus::http::iequals(a, a));
  ZEUS_FUZZ_CHECK(zeus::http::iequals(a, b) == zeus::http::iequals(b, a));
  std::string upper(input);
  for (char& c : upper) {
    if (c >= 'a' && c <= 'z') {
      c = static_cast<char>(c - 'a' + 'A');
    }
  }
  ZEUS_FUZZ_CHECK(zeus::http::iequals(input, upper));
}

// ---- Checks of parsed parameters ----------------------------------------------------------

// Request's accessors agree with the list they read.
void check_request_params(const Fields& params) {
  zeus::http::Request request;
  request.params = params;
  for (const auto& [key, value] : params) {
    ZEUS_FUZZ_CHECK(request.has_param(key));
    ZEUS_FUZZ_CHECK(request.param_count(key) >= 1);
    const auto first = request.param(key);
    ZEUS_FUZZ_CHECK(first.has_value());
    for (const auto& [other_key, other_value] : params) {
      if (other_key == key) {
        ZEUS_FUZZ_CHECK(*first == other_value);
        break;
      }
    }
  }
}

// zeusd's own query parser (src/daemon/query.hpp) under every route's field list: it either
// accepts or throws its 400 reply, whose JSON bodies always parse.
void check_zeusd_query(const Fields& params) {
  zeus::http::Request request;
  request.params = params;
  const std::vector<std::vector<std::string_view>> routes = {
      {},
      {"gpu_ids"},
      {"cpu_ids"},
      {"gpu_ids", "block"},
      {"gpu_ids", "enabled", "block"},
      {"gpu_ids", "power_limit_mw", "block"},
      {"gpu_ids", "min_clock_mhz", "max_clock_mhz", "block"},
      {"cpu_ids", "cpu", "dram"}};
  auto check_reply = [](const zeus::daemon::HttpError& error) {
    ZEUS_FUZZ_CHECK(error.status == 400);
    if (error.content_type == "application/json") {
      ZEUS_FUZZ_CHECK(nlohmann::json::accept(error.body));
    }
  };
  for (const auto& fields : routes) {
    try {
      const zeus::daemon::Query query(request, fields);
      for (const std::string_view field : fields) {
        const std::string name(field);
        try {
          if (name == "block" || name == "enabled" || name == "cpu" || name == "dram") {
            const bool value = query.boolean(name);
            ZEUS_FUZZ_CHECK(*query.optional(name) == (value ? "true" : "false"));
          } else if (name.ends_with("_mhz") || name.ends_with("_mw")) {
            const std::uint32_t value = query.u32(name);
            std::string digits = *query.optional(name);
            if (!digits.empty() && digits.front() == '+') {
              digits.erase(0, 1);
            }
            digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
            ZEUS_FUZZ_CHECK(digits == std::to_string(value));
          } else if (const auto value = query.optional(name)) {
            const std::vector<int> ids = zeus::daemon::parse_ids(name, *value, "GPU");
            ZEUS_FUZZ_CHECK(!ids.empty());
            ZEUS_FUZZ_CHECK(std::is_sorted(ids.begin(), ids.end()));
            ZEUS_FUZZ_CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
            ZEUS_FUZZ_CHECK(ids.front() >= 0);
          }
        } catch (const zeus::daemon::HttpError& error) {
          check_reply(error);
        }
      }
    } catch (const zeus::daemon::HttpError& error) {
      check_reply(error);
    }
  }
}

using BytesCheck = void (*)(std::string_view input);
using ParamsCheck = void (*)(const Fields& params);

constexpr std::array<BytesCheck, 5> kBytesChecks = {
    &check_percent_decode, &check_parse_query, &check_utf8, &check_bearer_token, &check_iequals};
// Every parser of decoded query parameters.
constexpr std::array<ParamsCheck, 2> kParamChecks = {&check_request_params, &check_zeusd_query};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (const BytesCheck check : kBytesChecks) {
    check(input);
  }
  if (const auto params = zeus::http::parse_query(input)) {
    for (const ParamsCheck check : kParamChecks) {
      check(*params);
    }
  }
  return 0;
}
