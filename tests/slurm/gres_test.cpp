// Slurm's GPU lists: SLURM_STEP_GPUS / SLURM_JOB_GPUS ("0,1,4-6") and one node's entry of a job's
// gres_detail_str (slurmctld's "gpu:a100:2(IDX:0,2)", "gpu(CNT:2)", ...), with the malformed and
// the hostile.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "slurm/gres.hpp"

namespace zeus::slurm {
namespace {

using Ids = std::vector<int>;

TEST(SlurmGpuList, ItemsAndRanges) {
  EXPECT_EQ(parse_gpu_list("0"), Ids({0}));
  EXPECT_EQ(parse_gpu_list("0,1,4-6"), Ids({0, 1, 4, 5, 6}));
  EXPECT_EQ(parse_gpu_list("7,3-4,0"), Ids({0, 3, 4, 7}));  // sorted
  EXPECT_EQ(parse_gpu_list("2-2"), Ids({2}));
  EXPECT_EQ(parse_gpu_list("007"), Ids({7}));
}

TEST(SlurmGpuList, DuplicatesAndOverlapsCountOnce) {
  EXPECT_EQ(parse_gpu_list("1,1,1"), Ids({1}));
  EXPECT_EQ(parse_gpu_list("0-3,2-5,3"), Ids({0, 1, 2, 3, 4, 5}));
}

TEST(SlurmGpuList, Malformed) {
  for (const std::string bad : {"",           ",",
                                "0,",         ",0",
                                "0,,1",       "6-4",
                                "-1",         "1-",
                                "-",          "1-2-3",
                                "a",          "0x1",
                                "+1",         " 1",
                                "1 ",         "1;2",
                                "1.0",        "4096",
                                "0-4096",     "99999999999999999999",
                                "2147483648", "0-2147483647",
                                "1,\x01",     "\xff"}) {
    EXPECT_EQ(parse_gpu_list(bad), std::nullopt) << bad;
  }
}

TEST(SlurmGpuList, TheLargestIndexAndTheWidestRange) {
  EXPECT_EQ(parse_gpu_list("4095"), Ids({4095}));
  const auto all = parse_gpu_list("0-4095");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 4096u);
  // A long list of wide ranges is bounded by the index limit, not by its length.
  std::string repeated = "0-4095";
  for (int i = 0; i < 200; ++i) {
    repeated += ",0-4095";
  }
  EXPECT_EQ(parse_gpu_list(repeated)->size(), 4096u);
}

TEST(SlurmGresDetail, IndexLists) {
  EXPECT_EQ(gpus_in_gres_detail("gpu:3(IDX:0-2)"), Ids({0, 1, 2}));
  EXPECT_EQ(gpus_in_gres_detail("gpu:a100:2(IDX:0,2)"), Ids({0, 2}));
  EXPECT_EQ(gpus_in_gres_detail("gpu:nvidia_h200-141gb:4(IDX:1,3-5)"), Ids({1, 3, 4, 5}));
  // Two types on one node are merged.
  EXPECT_EQ(gpus_in_gres_detail("gpu:a100:1(IDX:3),gpu:v100:2(IDX:0-1)"), Ids({0, 1, 3}));
}

TEST(SlurmGresDetail, OtherGresAreIgnored) {
  // The commas inside mps's parentheses do not split the entry.
  EXPECT_EQ(gpus_in_gres_detail("gpu:2(IDX:0-1),mps:100(0/100,0/100)"), Ids({0, 1}));
  EXPECT_EQ(gpus_in_gres_detail("mps:100(0/100,0/100),gpu:1(IDX:3)"), Ids({3}));
  EXPECT_EQ(gpus_in_gres_detail("shard:2(2/4,0/4),gpu:1(IDX:1)"), Ids({1}));
  EXPECT_EQ(gpus_in_gres_detail("mps:100(0/100,0/100)"), Ids{});
  EXPECT_EQ(gpus_in_gres_detail("gpus:1(IDX:9),gpux:1(IDX:8)"), Ids{});
  EXPECT_EQ(gpus_in_gres_detail("bandwidth:1G,gpu:1(IDX:2)"), Ids({2}));
}

TEST(SlurmGresDetail, NoGpusOnThisNode) {
  EXPECT_EQ(gpus_in_gres_detail(""), Ids{});
  EXPECT_EQ(gpus_in_gres_detail("gpu:0"), Ids{});
  EXPECT_EQ(gpus_in_gres_detail("gpu"), Ids{});
  EXPECT_EQ(gpus_in_gres_detail("gpu(IDX:N/A)"), Ids{});
  EXPECT_EQ(gpus_in_gres_detail("gpu:a100:0(IDX:N/A)"), Ids{});
}

TEST(SlurmGresDetail, GpusWithoutIndicesCannotBeRead) {
  // slurmctld writes "<name>(CNT:n)" when it allocated GPUs without a bitmap: there are GPUs,
  // but which ones cannot be told, typed or not.
  EXPECT_EQ(gpus_in_gres_detail("gpu(CNT:2)"), std::nullopt);
  EXPECT_EQ(gpus_in_gres_detail("gpu:a100(CNT:2)"), std::nullopt);
  EXPECT_EQ(gpus_in_gres_detail("mps:100(0/100),gpu(CNT:1)"), std::nullopt);
}

TEST(SlurmGresDetail, Garbage) {
  for (const std::string bad : {"gpu:2(IDX:0-1", "gpu:2(IDX:)", "gpu:2(IDX:x)", "gpu:2(IDX:1-0)",
                                "gpu:2(IDX:0,,1)", "gpu:2(IDX:-1)", "gpu:2(IDX:4096)",
                                "gpu:2(S:0-1)", "gpu:2()", "gpu:1(IDX:0),gpu:1(IDX:?)"}) {
    EXPECT_EQ(gpus_in_gres_detail(bad), std::nullopt) << bad;
  }
  // Unbalanced parentheses elsewhere leave no GPU to be read.
  EXPECT_EQ(gpus_in_gres_detail("((("), Ids{});
  EXPECT_EQ(gpus_in_gres_detail(")))"), Ids{});
  EXPECT_EQ(gpus_in_gres_detail(",,,"), Ids{});
}

TEST(SlurmGresDetail, RandomBytesNeverCrash) {
  std::mt19937 random(28);
  const std::string alphabet = "gpu:IDX(),-0123456789N/Amps\xff";
  for (int round = 0; round < 20000; ++round) {
    std::string text(random() % 40, ' ');
    for (char& c : text) {
      c = alphabet[random() % alphabet.size()];
    }
    const auto detail = gpus_in_gres_detail(text);
    const auto list = parse_gpu_list(text);
    for (const auto& ids : {detail, list}) {
      if (ids) {
        EXPECT_TRUE(std::is_sorted(ids->begin(), ids->end())) << text;
        for (const int id : *ids) {
          EXPECT_GE(id, 0) << text;
          EXPECT_LE(id, 4095) << text;
        }
      }
    }
  }
}

}  // namespace
}  // namespace zeus::slurm
