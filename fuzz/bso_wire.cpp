// A request or response body of the batch-size-optimizer server -> every body parser of
// zeus/bso/wire.hpp, as the server and the client run them: parse_body (bso/wire_text.hpp), then
// each of the typed readers on what it returns. Bad input may only be a ValidationError (a 422),
// whose JSON must always be dumpable; anything else that escapes (a nlohmann type_error,
// std::out_of_range) is a crash here and a 500 there. What parses survives a round trip through its
// own JSON.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "bso/wire_text.hpp"
#include "fuzz_check.hpp"
#include "zeus/bso/wire.hpp"

namespace {

using nlohmann::json;
namespace bso = zeus::bso;

// What every 422 must be: a non-empty list of FastAPI-shaped entries that dumps as JSON text.
void check_validation_error(const bso::ValidationError& error, const std::string& where) {
  ZEUS_FUZZ_CHECK(!error.errors().empty());
  const nlohmann::ordered_json body = error.to_json();
  const std::string text = body.dump();  // throws (type_error 316) on invalid UTF-8
  ZEUS_FUZZ_CHECK(json::accept(text));
  const auto& detail = body.at("detail");
  ZEUS_FUZZ_CHECK(detail.is_array() && detail.size() == error.errors().size());
  for (const auto& entry : detail) {
    const auto& loc = entry.at("loc");
    ZEUS_FUZZ_CHECK(loc.is_array() && !loc.empty() && loc[0] == where);
    ZEUS_FUZZ_CHECK(entry.at("msg").is_string() && !entry.at("msg").get<std::string>().empty());
    ZEUS_FUZZ_CHECK(entry.at("type").is_string());
  }
}

// Runs `parse` on `body`: either it returns a value that reads back the same from its own JSON,
// or it throws a well-formed ValidationError.
template <typename Parse>
void check_reader(const json& body, const std::string& where, Parse parse) {
  try {
    const auto value = parse(body);
    const std::string text = bso::to_json(value).dump();
    const auto again = parse(json::parse(text));
    ZEUS_FUZZ_CHECK(bso::to_json(again).dump() == text);
  } catch (const bso::ValidationError& error) {
    check_validation_error(error, where);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  json body;
  try {
    body = bso::parse_body(text);
  } catch (const bso::ValidationError& error) {
    check_validation_error(error, "body");
    return 0;
  }
  // parse_body accepts what json::parse accepts, and only that.
  ZEUS_FUZZ_CHECK(json::accept(text));

  check_reader(body, "body", [](const json& b) { return bso::job_spec_from_json(b); });
  check_reader(body, "body",
               [](const json& b) { return bso::job_spec_from_json(b, "body", false); });
  check_reader(body, "body", [](const json& b) { return bso::trial_id_from_json(b); });
  check_reader(body, "body", [](const json& b) { return bso::training_result_from_json(b); });
  check_reader(body, "response", [](const json& b) { return bso::report_response_from_json(b); });
  return 0;
}
