// A step's record merged into the job's AdminComment JSON, read back, and its summary text: what
// is already in the comment is kept, a comment that is not a JSON object is never rewritten, and
// numbers carry no floating-point noise.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "slurm/step_record.hpp"

namespace zeus::slurm {
namespace {

using nlohmann::json;

GpuUsage uncapped(double energy_j, double average_power_w) {
  GpuUsage usage;
  usage.energy_j = energy_j;
  usage.average_power_w = average_power_w;
  return usage;
}

StepRecord sample(const std::string& step = "0", const std::string& node = "n1") {
  StepRecord record;
  record.step = step;
  record.node = node;
  record.start_unix_s = 1712345678.25;
  record.duration_s = 61.015;
  record.gpus[0] = GpuUsage{.energy_j = 1.015,
                            .average_power_w = 211.2,
                            .power_limit_w = 250,
                            .prior_power_limit_w = 700};
  record.gpus[3] = uncapped(0.1 + 0.2, 75.0);
  return record;
}

json merged(const std::string& existing, const StepRecord& record, std::uint32_t max_steps = 256) {
  const auto text = merge_admin_comment(existing, record, max_steps);
  EXPECT_TRUE(text) << existing;
  return text ? json::parse(*text) : json();
}

TEST(SlurmStepName, SpecialSteps) {
  EXPECT_EQ(step_name(0), "0");
  EXPECT_EQ(step_name(12), "12");
  EXPECT_EQ(step_name(0xfffffffbu), "batch");
  EXPECT_EQ(step_name(0xfffffffcu), "extern");
  EXPECT_EQ(step_name(0xfffffffau), "interactive");
  EXPECT_EQ(step_name(0xfffffffdu), "pending");
  EXPECT_EQ(step_name(0xfffffff9u), "4294967289");
}

TEST(SlurmAdminComment, IntoAnEmptyComment) {
  for (const std::string empty : {"", " ", " \t\r\n "}) {
    const json comment = merged(empty, sample());
    ASSERT_TRUE(comment.is_object()) << empty;
    EXPECT_EQ(comment.size(), 1u);
    EXPECT_EQ(comment["zeus"]["version"], 1);
    const json& record = comment["zeus"]["steps"]["0"]["n1"];
    EXPECT_EQ(record["start"], 1712345678.25);
    EXPECT_EQ(record["duration_s"], 61.015);
    EXPECT_EQ(record["source"], "counter");
    EXPECT_EQ(record["energy_j"], 1.315);
    EXPECT_EQ(record["gpus"]["0"]["energy_j"], 1.015);
    EXPECT_EQ(record["gpus"]["0"]["avg_power_w"], 211.2);
    EXPECT_EQ(record["gpus"]["0"]["power_limit_w"], 250);
    EXPECT_EQ(record["gpus"]["0"]["prior_power_limit_w"], 700);
    EXPECT_TRUE(record["gpus"]["3"]["power_limit_w"].is_null());
    EXPECT_FALSE(record["gpus"]["3"].contains("prior_power_limit_w"));
    EXPECT_FALSE(record.contains("note"));
  }
}

TEST(SlurmAdminComment, NumbersWithoutFloatNoise) {
  const std::string text = *merge_admin_comment("", sample(), 256);
  EXPECT_NE(text.find("\"energy_j\":1.015"), std::string::npos) << text;
  EXPECT_NE(text.find("\"energy_j\":0.3"), std::string::npos) << text;  // 0.1 + 0.2
  EXPECT_NE(text.find("\"energy_j\":1.315"), std::string::npos) << text;
  EXPECT_NE(text.find("\"duration_s\":61.015"), std::string::npos) << text;
  EXPECT_EQ(text.find("0000000"), std::string::npos) << text;
  EXPECT_EQ(text.find("9999999"), std::string::npos) << text;
  // Large figures keep their millijoules.
  StepRecord big = sample();
  big.gpus[0].energy_j = 123456789.123456;
  const std::string big_text = *merge_admin_comment("", big, 256);
  EXPECT_NE(big_text.find("123456789.123"), std::string::npos) << big_text;
  EXPECT_EQ(big_text.find("123456789.1234"), std::string::npos) << big_text;
}

TEST(SlurmAdminComment, NonFiniteFiguresStillMakeJson) {
  StepRecord record = sample();
  record.gpus[0].energy_j = std::numeric_limits<double>::quiet_NaN();
  record.gpus[3].average_power_w = std::numeric_limits<double>::infinity();
  const auto text = merge_admin_comment("", record, 256);
  ASSERT_TRUE(text);
  EXPECT_TRUE(json::accept(*text)) << *text;
}

TEST(SlurmAdminComment, OtherKeysAreKept) {
  const std::string existing =
      R"({"site": "reserved for project X", "ticket": 4711, "pi": 3.14159,
          "nested": {"a": [1, 2, {"b": null}], "empty": {}}, "flag": false,
          "unicode": "Grüße \u00e9 \ud83d\ude00", "big": 18446744073709551615, "neg": -7})";
  const json before = json::parse(existing);
  const json after = merged(existing, sample());
  for (const auto& [key, value] : before.items()) {
    EXPECT_EQ(after.at(key), value) << key;
  }
  EXPECT_EQ(after.size(), before.size() + 1);
}

TEST(SlurmAdminComment, StepsOnOtherNodesAndOtherStepsAreKept) {
  std::string comment = *merge_admin_comment("", sample("0", "n2"), 256);
  comment = *merge_admin_comment(comment, sample("batch", "n1"), 256);
  const json result = merged(comment, sample("0", "n1"));
  const json& steps = result["zeus"]["steps"];
  EXPECT_TRUE(steps["0"].contains("n1"));
  EXPECT_TRUE(steps["0"].contains("n2"));
  EXPECT_TRUE(steps["batch"].contains("n1"));
  EXPECT_EQ(steps.size(), 2u);
}

TEST(SlurmAdminComment, TheSameStepAndNodeIsReplaced) {
  StepRecord first = sample();
  first.gpus[0].energy_j = 5.0;
  StepRecord second = sample();
  second.gpus[0].energy_j = 7.0;
  second.note = "GPU 3 is capped by job 9, which shares it: left as it is";
  const json result = merged(*merge_admin_comment("", first, 256), second);
  const json& record = result["zeus"]["steps"]["0"]["n1"];
  EXPECT_EQ(record["gpus"]["0"]["energy_j"], 7.0);
  EXPECT_EQ(record["note"], *second.note);
}

TEST(SlurmAdminComment, ForeignZeusShapesAreRepaired) {
  // A "zeus" key of another shape, or steps that are not objects, become ours again.
  EXPECT_EQ(merged(R"({"zeus": 5})", sample())["zeus"]["steps"]["0"]["n1"]["source"], "counter");
  EXPECT_EQ(merged(R"({"zeus": {"steps": []}})", sample())["zeus"]["steps"]["0"]["n1"]["source"],
            "counter");
  EXPECT_EQ(
      merged(R"({"zeus": {"steps": {"0": "x"}}})", sample())["zeus"]["steps"]["0"]["n1"]["source"],
      "counter");
}

TEST(SlurmAdminComment, WhatIsNotAJsonObjectIsLeftAlone) {
  for (const std::string foreign :
       {"please do not touch", "{", "{\"a\": 1", "[1, 2]", "[]", "\"text\"", "42", "null", "true",
        "{\"a\": 1} trailing", "{\"a\": \"\xff\xfe\"}", "{\"a\": \"\x01\"}", "\xef\xbb\xbf{}x",
        "{\"a\": 1e999}", "{'a': 1}", "// comment\n{}"}) {
    EXPECT_EQ(merge_admin_comment(foreign, sample(), 256), std::nullopt) << foreign;
  }
}

TEST(SlurmAdminComment, DeeplyNestedCommentIsLeftAlone) {
  // Nested more than 100 levels below the top object it is not rewritten (rewriting 100,000
  // overflowed the stack), nor read for a record.
  const auto nested = [](int depth) {
    return "{\"a\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
  };
  EXPECT_EQ(merge_admin_comment(nested(100000), sample(), 256), std::nullopt);
  EXPECT_EQ(merge_admin_comment(nested(101), sample(), 256), std::nullopt);
  EXPECT_FALSE(find_step_record(nested(100000), "0", "n1"));
  const auto kept = merge_admin_comment(nested(100), sample(), 256);
  ASSERT_TRUE(kept);
  EXPECT_EQ(json::parse(*kept)["a"], json::parse(nested(100))["a"]);
}

TEST(SlurmAdminComment, InvalidUtf8InTheRecordIsReplaced) {
  StepRecord record = sample("0", std::string("n\xff"
                                              "1"));
  record.note = std::string("bad \xc3 byte");
  const auto text = merge_admin_comment("", record, 256);
  ASSERT_TRUE(text);
  EXPECT_TRUE(json::accept(*text)) << *text;
}

TEST(SlurmAdminComment, StepsBeyondTheLimitAreSummed) {
  std::string comment;
  for (const std::string step : {"0", "1", "2", "3"}) {
    StepRecord record = sample(step);
    record.gpus = {{0, uncapped(10.5, 0.0)}};
    comment = *merge_admin_comment(comment, record, 2);
  }
  const json result = json::parse(comment);
  EXPECT_EQ(result["zeus"]["steps"].size(), 2u);
  EXPECT_TRUE(result["zeus"]["steps"].contains("0"));
  EXPECT_TRUE(result["zeus"]["steps"].contains("1"));
  const json& other = result["zeus"]["other_steps"];
  EXPECT_EQ(other["count"], 2);
  EXPECT_TRUE(other["count"].is_number_integer()) << other.dump();
  EXPECT_NE(comment.find("\"count\":2,"), std::string::npos) << comment;
  EXPECT_EQ(other["energy_j"], 21.0);
  // A recorded step on another node is still recorded one by one.
  const json more = merged(comment, sample("1", "n2"), 2);
  EXPECT_TRUE(more["zeus"]["steps"]["1"].contains("n2"));
  EXPECT_EQ(more["zeus"]["other_steps"]["count"], 2);
  // other_steps of another shape start again.
  const json repaired =
      merged(R"({"zeus": {"steps": {"a": {}}, "other_steps": {"count": "x", "energy_j": []}}})",
             sample("b"), 1);
  EXPECT_EQ(repaired["zeus"]["other_steps"]["count"], 1);
  EXPECT_EQ(repaired["zeus"]["other_steps"]["energy_j"], 1.315);
}

TEST(SlurmFindStepRecord, RoundTrip) {
  StepRecord record = sample("batch", "node7");
  record.note = "GPU 5 is not one of zeusd's GPUs (4 known): not measured or capped";
  record.source = "polling";
  const std::string comment = *merge_admin_comment(R"({"other": 1})", record, 256);
  const auto found = find_step_record(comment, "batch", "node7");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->step, "batch");
  EXPECT_EQ(found->node, "node7");
  EXPECT_DOUBLE_EQ(found->start_unix_s, record.start_unix_s);
  EXPECT_DOUBLE_EQ(found->duration_s, record.duration_s);
  EXPECT_EQ(found->source, "polling");
  EXPECT_EQ(found->note, record.note);
  ASSERT_EQ(found->gpus.size(), 2u);
  EXPECT_DOUBLE_EQ(found->gpus.at(0).energy_j, 1.015);
  EXPECT_DOUBLE_EQ(found->gpus.at(0).average_power_w, 211.2);
  EXPECT_EQ(found->gpus.at(0).power_limit_w, 250u);
  EXPECT_EQ(found->gpus.at(0).prior_power_limit_w, 700u);
  EXPECT_DOUBLE_EQ(found->gpus.at(3).energy_j, 0.3);
  EXPECT_EQ(found->gpus.at(3).power_limit_w, std::nullopt);
  EXPECT_EQ(found->gpus.at(3).prior_power_limit_w, std::nullopt);
  EXPECT_DOUBLE_EQ(found->energy_j(), 1.315);
  // The summary printed from the comment is the one printed from the record (to 0.001).
  EXPECT_EQ(summary_text(12, *found), summary_text(12, record));
}

TEST(SlurmFindStepRecord, AbsentOrForeign) {
  const std::string comment = *merge_admin_comment("", sample("0", "n1"), 256);
  EXPECT_FALSE(find_step_record(comment, "1", "n1"));
  EXPECT_FALSE(find_step_record(comment, "0", "n2"));
  EXPECT_FALSE(find_step_record("", "0", "n1"));
  EXPECT_FALSE(find_step_record("not json", "0", "n1"));
  EXPECT_FALSE(find_step_record("[1]", "0", "n1"));
  EXPECT_FALSE(find_step_record(R"({"zeus": []})", "0", "n1"));
  EXPECT_FALSE(find_step_record(R"({"zeus": {"steps": {"0": {"n1": 5}}}})", "0", "n1"));
}

TEST(SlurmFindStepRecord, OddFieldsAreSkipped) {
  const auto found = find_step_record(
      R"({"zeus": {"steps": {"0": {"n1": {"start": "x", "duration_s": null, "source": 5,
          "note": [], "gpus": {"1": {"energy_j": 2.5, "power_limit_w": -1},
          "x": {"energy_j": 1}, "2": "text", "3": {"power_limit_w": 250.5}}}}}}})",
      "0", "n1");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->start_unix_s, 0.0);
  EXPECT_EQ(found->duration_s, 0.0);
  EXPECT_EQ(found->source, "counter");
  EXPECT_FALSE(found->note);
  EXPECT_DOUBLE_EQ(found->gpus.at(1).energy_j, 2.5);
  EXPECT_EQ(found->gpus.at(1).power_limit_w, std::nullopt);
  EXPECT_EQ(found->gpus.count(2), 0u);
  EXPECT_EQ(found->gpus.at(3).power_limit_w, std::nullopt);
}

TEST(SlurmSummaryText, Format) {
  StepRecord record;
  record.step = "0";
  record.node = "node7";
  record.duration_s = 61.0151;
  record.gpus[0] = GpuUsage{.energy_j = 12890.14,
                            .average_power_w = 211.249,
                            .power_limit_w = 250,
                            .prior_power_limit_w = 700};
  record.gpus[1] = uncapped(12820.16, 210.1);
  EXPECT_EQ(summary_text(12, record),
            "zeus: step 12.0 on node7: 61.02 s, 2 GPUs, 25710.3 J\n"
            "  GPU 0: 12890.1 J, 211.2 W average, capped at 250 W\n"
            "  GPU 1: 12820.2 J, 210.1 W average, not capped\n");
  record.gpus.erase(1);
  record.step = "batch";
  record.note = "GPU 1 is capped by job 9, which shares it: left as it is";
  EXPECT_EQ(summary_text(4294967294u, record),
            "zeus: step 4294967294.batch on node7: 61.02 s, 1 GPU, 12890.1 J\n"
            "  GPU 0: 12890.1 J, 211.2 W average, capped at 250 W\n"
            "  note: GPU 1 is capped by job 9, which shares it: left as it is\n");
  record.gpus.clear();
  record.note.reset();
  EXPECT_EQ(summary_text(1, record), "zeus: step 1.batch on node7: 61.02 s, 0 GPUs, 0.0 J\n");
}

}  // namespace
}  // namespace zeus::slurm
