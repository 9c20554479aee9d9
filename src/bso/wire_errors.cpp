// The wire format's validation errors (FastAPI's 422 shape, always valid UTF-8), the job-id rule,
// and the body's text to JSON with the failure located (["body", "batch_sizes", 2]).
#include <fmt/format.h>

#include <limits>
#include <string_view>

#include "bso/wire_text.hpp"
#include "common/utf8.hpp"
#include "zeus/bso/wire.hpp"

namespace zeus::bso {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string summarize(const std::vector<FieldError>& errors) {
  std::string text = "invalid request:";
  for (const FieldError& error : errors) {
    text.append(" ")
        .append(error.loc.dump(-1, ' ', false, json::error_handler_t::replace))
        .append(": ")
        .append(error.msg)
        .append(";");
  }
  return text;
}

// `value` with every string (keys included) made valid UTF-8.
json valid_utf8_json(const json& value) {
  if (value.is_string()) {
    return to_valid_utf8(value.get_ref<const std::string&>());
  }
  if (value.is_array()) {
    json out = json::array();
    for (const json& item : value) {
      out.push_back(valid_utf8_json(item));
    }
    return out;
  }
  if (value.is_object()) {
    json out = json::object();
    for (const auto& [key, item] : value.items()) {
      out[to_valid_utf8(key)] = valid_utf8_json(item);
    }
    return out;
  }
  return value;
}

const std::vector<FieldError>& make_valid_utf8(std::vector<FieldError>& errors) {
  for (FieldError& error : errors) {
    error.loc = valid_utf8_json(error.loc);
    error.msg = to_valid_utf8(error.msg);
    error.type = to_valid_utf8(error.type);
    error.ctx = valid_utf8_json(error.ctx);
  }
  return errors;
}

// Follows the parser through a body that failed to parse, to name where it failed: the "loc" of
// the value being read (["body", "batch_sizes", 2]) and whether it was a key.
class ErrorLocator final : public nlohmann::json_sax<json> {
 public:
  explicit ErrorLocator(std::string where) : where_(std::move(where)) {}

  bool null() override { return value(); }
  bool boolean(bool /*unused*/) override { return value(); }
  bool number_integer(number_integer_t /*unused*/) override { return value(); }
  bool number_unsigned(number_unsigned_t /*unused*/) override { return value(); }
  bool number_float(number_float_t /*unused*/, const string_t& /*unused*/) override {
    return value();
  }
  bool string(string_t& /*unused*/) override { return value(); }
  bool binary(binary_t& /*unused*/) override { return value(); }
  bool start_object(std::size_t /*unused*/) override {
    frames_.push_back({true, {}, 0, false});
    return true;
  }
  bool key(string_t& key) override {
    frames_.back().key = key;
    frames_.back().in_value = true;
    return true;
  }
  bool end_object() override {
    frames_.pop_back();
    return value();
  }
  bool start_array(std::size_t /*unused*/) override {
    frames_.push_back({false, {}, 0, true});
    return true;
  }
  bool end_array() override {
    frames_.pop_back();
    return value();
  }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& error) override {
    failed_ = true;
    position_ = position;
    token_ = last_token;
    id_ = error.id;
    in_key_ = !frames_.empty() && frames_.back().object && !frames_.back().in_value;
    loc_ = json::array({where_});
    for (const Frame& frame : frames_) {
      if (!frame.object) {
        loc_.push_back(frame.index);
      } else if (frame.in_value) {
        loc_.push_back(frame.key);
      }
    }
    return false;
  }

  bool failed() const { return failed_; }
  // Characters read when it failed (the offset just past the byte that failed it).
  std::size_t position() const { return position_; }
  // The token being read, as far as it was read.
  const std::string& token() const { return token_; }
  int id() const { return id_; }
  bool in_key() const { return in_key_; }
  // The value being read; for a key, the object that holds it.
  const json& loc() const { return loc_; }

 private:
  struct Frame {
    bool object;
    std::string key;
    std::size_t index;  // arrays: the element being read
    bool in_value;      // objects: after the key
  };
  bool value() {
    if (!frames_.empty()) {
      Frame& frame = frames_.back();
      if (frame.object) {
        frame.in_value = false;
      } else {
        ++frame.index;
      }
    }
    return true;
  }

  std::string where_;
  std::vector<Frame> frames_;
  bool failed_ = false;
  std::size_t position_ = 0;
  std::string token_;
  int id_ = 0;
  bool in_key_ = false;
  json loc_;
};

}  // namespace

// At most `limit` bytes of `text` for a message, cut on a UTF-8 boundary, with "..." when cut.
std::string excerpt(const std::string& text, std::size_t limit) {
  if (text.size() <= limit) {
    return to_valid_utf8(text);
  }
  std::size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return to_valid_utf8(text.substr(0, end)) + "...";
}

std::string out_of_range_message(const std::string& number) {
  return "the number " + excerpt(number) +
         " is out of range: numbers must fit a 64-bit float (magnitude at most "
         "1.7976931348623157e+308)";
}

ValidationError::ValidationError(std::vector<FieldError> errors)
    : Error(ErrorKind::kInvalidArgument, summarize(make_valid_utf8(errors))),
      errors_(std::move(errors)) {}

nlohmann::ordered_json ValidationError::to_json() const {
  ordered_json detail = ordered_json::array();
  for (const FieldError& error : errors_) {
    ordered_json entry;
    entry["loc"] = error.loc;
    entry["msg"] = error.msg;
    entry["type"] = error.type;
    if (!error.ctx.is_null()) {
      entry["ctx"] = error.ctx;
    }
    detail.push_back(std::move(entry));
  }
  ordered_json out;
  out["detail"] = std::move(detail);
  return out;
}

std::string job_id_problem(const std::string& id, std::size_t max_bytes) {
  if (id.empty()) {
    return "must not be empty";
  }
  if (id.size() > max_bytes) {
    return fmt::format("is {} bytes long; at most {} bytes are allowed", id.size(), max_bytes);
  }
  if (const std::size_t bad = first_invalid_utf8(id); bad != std::string::npos) {
    return fmt::format("is not valid UTF-8 (byte 0x{:02X} at offset {})",
                       static_cast<unsigned char>(id[bad]), bad);
  }
  if (id.find('/') != std::string::npos) {
    return "contains '/', which cannot be read back through GET /jobs/{job_id}; use another "
           "character such as '-' or '_'";
  }
  for (std::size_t i = 0; i < id.size(); ++i) {
    const auto c = static_cast<unsigned char>(id[i]);
    // C0 controls and DEL; C1 controls are U+0080..U+009F, encoded as C2 80..C2 9F.
    const bool c1 = c == 0xC2 && i + 1 < id.size() && static_cast<unsigned char>(id[i + 1]) < 0xA0;
    if (c < 0x20 || c == 0x7F || c1) {
      const unsigned code = c1 ? static_cast<unsigned char>(id[i + 1]) : c;
      return fmt::format(
          "contains the control character U+{:04X} at offset {}; use printable "
          "characters only",
          code, i);
    }
  }
  return {};
}

nlohmann::json parse_body(const std::string& text, const std::string& where) {
  try {
    return json::parse(text);
  } catch (const json::out_of_range&) {
    // A number beyond a double's range (nlohmann's out_of_range 406): name where it was.
    ErrorLocator locator(where);
    json::sax_parse(text, &locator);
    const std::string number = locator.failed() ? locator.token() : std::string("?");
    throw ValidationError({{locator.failed() ? locator.loc() : json::array({where}),
                            out_of_range_message(number), "value_error.number.out_of_range",
                            json{{"limit_value", std::numeric_limits<double>::max()}}}});
  } catch (const json::parse_error& error) {
    if (std::string_view(error.what()).find("ill-formed UTF-8") != std::string_view::npos) {
      ErrorLocator locator(where);
      json::sax_parse(text, &locator);
      if (locator.failed()) {
        // The token is the string read so far, from its opening quote.
        const std::string& token = locator.token();
        const std::size_t start =
            locator.position() >= token.size() ? locator.position() - token.size() : 0;
        const std::size_t bad_in_token = first_invalid_utf8(token);
        const std::size_t bad = start + (bad_in_token == std::string::npos ? 0 : bad_in_token);
        const std::string byte = bad < text.size()
                                     ? fmt::format("byte 0x{:02X} at offset {}",
                                                   static_cast<unsigned char>(text[bad]), bad)
                                     : fmt::format("offset {}", bad);
        json loc = locator.loc();
        std::string message;
        if (locator.in_key()) {
          const std::string key = token.empty() ? token : token.substr(1);
          loc.push_back(excerpt(key));
          message = "this key is not valid UTF-8 (" + byte +
                    " of the body); send keys and strings as UTF-8 text";
        } else {
          message =
              "value is not valid UTF-8 (" + byte + " of the body); send strings as UTF-8 text";
        }
        throw ValidationError({{loc, message, "value_error.str.utf8", nullptr}});
      }
    }
    // Python reports line and column; derive them from the byte offset.
    const std::size_t position = error.byte == 0 ? 0 : error.byte - 1;
    std::size_t line = 1;
    std::size_t column = 1;
    for (std::size_t i = 0; i < position && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    const std::string message = text.empty()
                                    ? std::string("Expecting value: the request body is empty")
                                    : fmt::format("Invalid JSON at line {} column {} (char {}): {}",
                                                  line, column, position, error.what());
    throw ValidationError(
        {{json{where, position}, message, "value_error.jsondecode",
          json{{"msg", message}, {"pos", position}, {"lineno", line}, {"colno", column}}}});
  }
}

}  // namespace zeus::bso
