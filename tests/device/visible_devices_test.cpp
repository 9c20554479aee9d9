#include "device/visible_devices.hpp"

#include <gtest/gtest.h>

#include "zeus/common/error.hpp"

namespace {

const std::vector<std::string> kUuids = {
    "GPU-11111111-aaaa-4000-8000-000000000000", "GPU-22222222-bbbb-4000-8000-000000000000",
    "GPU-22223333-cccc-4000-8000-000000000000", "GPU-44444444-dddd-4000-8000-000000000000"};

std::vector<int> resolve(const std::optional<std::string>& value) {
  return zeus::device::resolve_visible_devices("CUDA_VISIBLE_DEVICES", value, kUuids);
}

std::string error_of(const std::string& value) {
  try {
    resolve(value);
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument);
    return error.what();
  }
  ADD_FAILURE() << "no error for " << value;
  return "";
}

TEST(VisibleDevices, UnsetShowsEveryDeviceInOrder) {
  EXPECT_EQ(resolve(std::nullopt), (std::vector<int>{0, 1, 2, 3}));
}

TEST(VisibleDevices, IndicesMapInTheGivenOrder) {
  EXPECT_EQ(resolve("2,0"), (std::vector<int>{2, 0}));
  EXPECT_EQ(resolve(" 3 , 1 "), (std::vector<int>{3, 1}));
}

TEST(VisibleDevices, EmptyHidesEverything) {
  EXPECT_TRUE(resolve("").empty());
  EXPECT_TRUE(resolve("  ").empty());
}

TEST(VisibleDevices, ListStopsAtTheFirstUnusableEntryAsCudaDoes) {
  EXPECT_TRUE(resolve("-1").empty());
  EXPECT_EQ(resolve("1,7,2"), (std::vector<int>{1}));
  EXPECT_EQ(resolve("0,-1,1"), (std::vector<int>{0}));
  EXPECT_EQ(resolve("2,2,3"), (std::vector<int>{2}));
}

TEST(VisibleDevices, UuidsAndUniquePrefixes) {
  EXPECT_EQ(resolve("GPU-44444444-dddd-4000-8000-000000000000,GPU-1111"), (std::vector<int>{3, 0}));
  EXPECT_EQ(resolve("gpu-22223"), (std::vector<int>{2}));
  EXPECT_EQ(resolve("0,GPU-ffffffff"), (std::vector<int>{0}));  // unknown UUID ends the list
  EXPECT_NE(error_of("GPU-2222").find("several"), std::string::npos);
}

TEST(VisibleDevices, MixedIndicesAndUuids) {
  EXPECT_EQ(resolve("3,GPU-22222222"), (std::vector<int>{3, 1}));
}

TEST(VisibleDevices, MigInstancesAreAClearError) {
  const std::string message = error_of("MIG-9a3c1e2b-0000-5000-8000-000000000000");
  EXPECT_NE(message.find("MIG"), std::string::npos);
  EXPECT_NE(message.find("CUDA_VISIBLE_DEVICES=\"MIG-9a3c"), std::string::npos);
  EXPECT_FALSE(error_of("0,MIG-GPU-11111111/1/0").empty());
}

TEST(VisibleDevices, MalformedValuesAreQuoted) {
  EXPECT_NE(error_of("zero").find("CUDA_VISIBLE_DEVICES=\"zero\""), std::string::npos);
  EXPECT_NE(error_of("0,,1").find("empty entry"), std::string::npos);
  EXPECT_NE(error_of("0;1").find("\"0;1\""), std::string::npos);
  // A syntax error is reported even after an entry where CUDA would stop reading.
  EXPECT_FALSE(error_of("9,abc").empty());
}

TEST(VisibleDevices, HipUsesItsOwnVariableName) {
  try {
    zeus::device::resolve_visible_devices("HIP_VISIBLE_DEVICES", std::string("x"), kUuids);
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_NE(std::string(error.what()).find("HIP_VISIBLE_DEVICES=\"x\""), std::string::npos);
  }
}

}  // namespace
