// common/text.hpp, common/utf8.hpp, common/base64.hpp and common/duration.hpp: trimming,
// splitting, reading files, hashing names, UTF-8 checks, base64url, the constant-time compare and
// durations typed by people.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base64.hpp"
#include "common/duration.hpp"
#include "common/text.hpp"
#include "common/utf8.hpp"
#include "support/temp_dir.hpp"
#include "zeus/common/error.hpp"

namespace {

using zeus::base64url_decode;
using zeus::base64url_encode;
using zeus::testing::TempDir;
using zeus::text::constant_time_equal;

TEST(JsonErrorText, DropsTheLibrarysIdentifier) {
  try {
    (void)nlohmann::json::parse("{\"a\": \"x\"}").at("a").get<int>();
    FAIL() << "no type error";
  } catch (const nlohmann::json::exception& error) {
    ASSERT_TRUE(std::string_view(error.what()).starts_with("[json.exception.type_error."));
    EXPECT_EQ(zeus::text::json_error_text(error.what()), "type must be number, but is string");
  }
  try {
    const nlohmann::json unfinished = nlohmann::json::parse("{");
    FAIL() << "no parse error: " << unfinished.dump();
  } catch (const nlohmann::json::exception& error) {
    EXPECT_TRUE(
        zeus::text::json_error_text(error.what()).starts_with("parse error at line 1, column 2"))
        << error.what();
  }
  EXPECT_EQ(zeus::text::json_error_text("plain text"), "plain text");
  EXPECT_EQ(zeus::text::json_error_text("[json.exception.no end"), "[json.exception.no end");
}

TEST(Utf8, AcceptsWellFormedTextAndFindsTheFirstBadByte) {
  EXPECT_TRUE(zeus::is_valid_utf8(""));
  EXPECT_TRUE(zeus::is_valid_utf8("plain ascii"));
  EXPECT_TRUE(zeus::is_valid_utf8("\xC3\xBC \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"));
  EXPECT_EQ(zeus::first_invalid_utf8("ab\xFF"), 2u);
  EXPECT_EQ(zeus::first_invalid_utf8("\xC0\xAF"), 0u);          // overlong '/'
  EXPECT_EQ(zeus::first_invalid_utf8("x\xE0\x80\xAF"), 1u);     // overlong, 3 bytes
  EXPECT_EQ(zeus::first_invalid_utf8("\xED\xA0\x80"), 0u);      // surrogate U+D800
  EXPECT_EQ(zeus::first_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(zeus::first_invalid_utf8("\xE2\x82"), 0u);          // truncated
  EXPECT_EQ(zeus::first_invalid_utf8("\x80"), 0u);              // lone continuation
  EXPECT_EQ(zeus::first_invalid_utf8(std::string("a\0b", 3)), std::string::npos);
}

TEST(Utf8, ToValidReplacesEachBadByte) {
  EXPECT_EQ(zeus::to_valid_utf8("ok \xC3\xBC"), "ok \xC3\xBC");
  const std::string replacement = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(zeus::to_valid_utf8(std::string("a\xFF\xFE") + "b"),
            "a" + replacement + replacement + "b");
  EXPECT_TRUE(zeus::is_valid_utf8(zeus::to_valid_utf8("\xE2\x82 \xED\xA0\x80 \xC0")));
}

TEST(Utf8, ToPrintableEscapesControlsAndBadBytesOnly) {
  EXPECT_EQ(zeus::to_printable("plain, \xC3\xBC \xE2\x82\xAC\tand\nlines"),
            "plain, \xC3\xBC \xE2\x82\xAC\tand\nlines");
  EXPECT_EQ(zeus::to_printable("a\x1b[31mRED\x7f"), "a\\x1b[31mRED\\x7f");
  EXPECT_EQ(zeus::to_printable("\xC2\x9B"
                               "2J"),
            "\\xc2\\x9b"
            "2J");  // C1 CSI
  EXPECT_EQ(zeus::to_printable("\xFF\xFE,x\xE2\x82"), "\\xff\\xfe,x\\xe2\\x82");
  EXPECT_EQ(zeus::to_printable(std::string("\0z", 2)), "\\x00z");
}

TEST(Text, TrimRemovesOnlyTheGivenCharactersAtTheEnds) {
  EXPECT_EQ(zeus::text::trim("  a b \t\r\n"), "a b");
  EXPECT_EQ(zeus::text::trim(" \t "), "");
  EXPECT_EQ(zeus::text::trim(""), "");
  EXPECT_EQ(zeus::text::trim("\"x\" ", "\" "), "x");
}

TEST(Text, AsciiLowerAndIequalsTouchOnlyAToZ) {
  EXPECT_EQ(zeus::text::ascii_lower("HTTP://Host:80/A-Z_az09"), "http://host:80/a-z_az09");
  // Bytes past ASCII (here UTF-8 for "À" and a stray 0xC9) are kept as they are, in any
  // locale.
  EXPECT_EQ(zeus::text::ascii_lower("\xC3\x80\xC9I"), "\xC3\x80\xC9i");
  EXPECT_EQ(zeus::text::ascii_lower(""), "");
  EXPECT_TRUE(zeus::text::ascii_iequals("Commercial", "cOMMERCIAL"));
  EXPECT_TRUE(zeus::text::ascii_iequals("", ""));
  EXPECT_FALSE(zeus::text::ascii_iequals("Commercial", "Commercia"));
  EXPECT_FALSE(zeus::text::ascii_iequals("[", "{"));  // 0x5B and 0x7B differ by 0x20 too
  EXPECT_FALSE(zeus::text::ascii_iequals("\xC0", "\xE0"));
}

TEST(Text, SplitKeepsEmptyPiecesUnlessAsked) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(zeus::text::split("a,,b", ','), (V{"a", "", "b"}));
  EXPECT_EQ(zeus::text::split("", ','), (V{""}));
  EXPECT_EQ(zeus::text::split_trimmed(" a , ,b,", ','), (V{"a", "", "b", ""}));
  EXPECT_EQ(zeus::text::split_trimmed(" a , ,b,", ',', true), (V{"a", "b"}));
  EXPECT_EQ(zeus::text::split_to_strings("x; y", ';'), (std::vector<std::string>{"x", "y"}));
}

TEST(Text, ReadFileKeepsEveryByteAndNamesAMissingFile) {
  TempDir dir;
  const auto path = dir.path() / "f";
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string("a\0b\n ", 5);
  }
  EXPECT_EQ(zeus::text::read_file(path), std::string("a\0b\n ", 5));
  try {
    zeus::text::read_file(dir.path() / "missing");
    FAIL() << "expected an error";
  } catch (const zeus::Error& e) {
    EXPECT_EQ(e.kind(), zeus::ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
}

TEST(Text, Fnv1aMatchesThePublishedVectors) {
  EXPECT_EQ(zeus::text::fnv1a_32(""), 0x811c9dc5U);
  EXPECT_EQ(zeus::text::fnv1a_32("a"), 0xe40c292cU);
  EXPECT_EQ(zeus::text::fnv1a_64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(zeus::text::fnv1a_64("a"), 0xaf63dc4c8601ec8cULL);
}

TEST(Base64Url, Rfc4648VectorsWithoutPadding) {
  EXPECT_EQ(base64url_encode(""), "");
  EXPECT_EQ(base64url_encode("f"), "Zg");
  EXPECT_EQ(base64url_encode("fo"), "Zm8");
  EXPECT_EQ(base64url_encode("foo"), "Zm9v");
  EXPECT_EQ(base64url_encode("foob"), "Zm9vYg");
  EXPECT_EQ(base64url_encode("fooba"), "Zm9vYmE");
  EXPECT_EQ(base64url_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64url_encode(std::string("\xfb\xff\xbf", 3)), "-_-_");  // URL alphabet
}

TEST(Base64Url, RoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) {
    all += static_cast<char>(i);
  }
  for (std::size_t n = 0; n <= all.size(); n += 37) {
    std::string part = all.substr(0, n);
    EXPECT_EQ(base64url_decode(base64url_encode(part)), part) << n;
  }
}

TEST(Base64Url, RejectsBadInput) {
  EXPECT_FALSE(base64url_decode("Zg==").has_value());    // padding
  EXPECT_FALSE(base64url_decode("Zm9v+g").has_value());  // standard alphabet
  EXPECT_FALSE(base64url_decode("Zm9v/g").has_value());
  EXPECT_FALSE(base64url_decode("Zm 9v").has_value());
  EXPECT_FALSE(base64url_decode("Zm9vY").has_value());  // impossible length
  EXPECT_FALSE(base64url_decode("Zh").has_value());     // non-zero trailing bits
  EXPECT_EQ(base64url_decode("Zg"), "f");
}

TEST(ConstantTimeEqual, ComparesContentsAndLengths) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
}

// The Pushgateway's "@base64" label values are padded.
TEST(Base64Url, PaddedToAMultipleOfFour) {
  using zeus::Base64Padding;
  EXPECT_EQ(base64url_encode("", Base64Padding::kPadded), "");
  EXPECT_EQ(base64url_encode("f", Base64Padding::kPadded), "Zg==");
  EXPECT_EQ(base64url_encode("fo", Base64Padding::kPadded), "Zm8=");
  EXPECT_EQ(base64url_encode("foo", Base64Padding::kPadded), "Zm9v");
  EXPECT_EQ(base64url_encode("foob", Base64Padding::kPadded), "Zm9vYg==");
  EXPECT_EQ(base64url_encode("/a?b", Base64Padding::kPadded), "L2E_Yg==");
}

// The secret's length does not change how long a wrong guess takes: a shorter or longer secret
// is still unequal, and an empty one equals only the empty string.
TEST(ConstantTimeEqual, ASecretOfAnotherLengthIsNeverEqual) {
  EXPECT_FALSE(constant_time_equal("abcabc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", ""));
  EXPECT_FALSE(constant_time_equal("", "abc"));
}

// One grammar for every command: what zeus's flags took (decimals, ms/min, blanks, zero) and what
// `zeusd token issue --expires` took (days).
TEST(Duration, OneGrammarForEveryCommand) {
  using zeus::parse_duration_s;
  EXPECT_EQ(parse_duration_s("10s", "--interval"), 10.0);
  EXPECT_EQ(parse_duration_s("500ms", "--interval"), 0.5);
  EXPECT_EQ(parse_duration_s("2m", "--interval"), 120.0);
  EXPECT_EQ(parse_duration_s("2min", "--interval"), 120.0);
  EXPECT_EQ(parse_duration_s("1.5h", "--interval"), 5400.0);
  EXPECT_EQ(parse_duration_s("7d", "--interval"), 604800.0);
  EXPECT_EQ(parse_duration_s("3600", "--interval"), 3600.0);
  EXPECT_EQ(parse_duration_s("0.5", "--interval"), 0.5);
  EXPECT_EQ(parse_duration_s(" +10 s ", "--interval"), 10.0);
  EXPECT_EQ(parse_duration_s("0", "--interval"), 0.0);
  for (const auto& [bad, why] :
       std::vector<std::pair<std::string, std::string>>{{"", "it is empty"},
                                                        {" ", "it is empty"},
                                                        {"-1s", "it is negative"},
                                                        {"s", "it does not start with a number"},
                                                        {"1w", "unknown unit \"w\""},
                                                        {"1e3", "unknown unit \"e3\""},
                                                        {"1 h1", "unknown unit \"h1\""}}) {
    try {
      parse_duration_s(bad, "--duration");
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const zeus::Error& error) {
      EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument);
      const std::string message = error.what();
      EXPECT_NE(message.find("--duration \"" + bad + "\" is not a valid duration: " + why),
                std::string::npos)
          << message;
    }
  }
}

}  // namespace
