// Single-process checks of the Reducer implementations that need no MPI.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "zeus/runtime/reducer.hpp"

namespace {

TEST(LocalReducer, ReturnsValuesUnchanged) {
  zeus::runtime::LocalReducer local;
  zeus::runtime::Reducer& reducer = local;
  EXPECT_EQ(reducer.world_size(), 1);
  EXPECT_DOUBLE_EQ(reducer.sum(12.5), 12.5);
  EXPECT_DOUBLE_EQ(reducer.max(-3.0), -3.0);
  EXPECT_DOUBLE_EQ(reducer.sum(0.0), 0.0);
}

TEST(CallbackReducer, DelegatesToTheCallables) {
  std::vector<double> sum_calls;
  std::vector<double> max_calls;
  // Stands in for a second rank that always contributes energy 20 and time 2.5.
  auto reducer = std::make_shared<zeus::runtime::CallbackReducer>(
      [&sum_calls](double value) {
        sum_calls.push_back(value);
        return value + 20.0;
      },
      [&max_calls](double value) {
        max_calls.push_back(value);
        return value > 2.5 ? value : 2.5;
      },
      2);
  std::shared_ptr<zeus::runtime::Reducer> base = reducer;
  EXPECT_EQ(base->world_size(), 2);
  EXPECT_DOUBLE_EQ(base->sum(10.0), 30.0);
  EXPECT_DOUBLE_EQ(base->max(1.5), 2.5);
  EXPECT_DOUBLE_EQ(base->max(4.0), 4.0);
  EXPECT_EQ(sum_calls, (std::vector<double>{10.0}));
  EXPECT_EQ(max_calls, (std::vector<double>{1.5, 4.0}));
}

TEST(CallbackReducer, PropagatesExceptionsFromTheCallables) {
  zeus::runtime::CallbackReducer reducer(
      [](double) -> double { throw std::runtime_error("all_reduce"); },
      [](double value) { return value; }, 4);
  EXPECT_THROW(reducer.sum(1.0), std::runtime_error);
  EXPECT_DOUBLE_EQ(reducer.max(1.0), 1.0);
  EXPECT_EQ(reducer.world_size(), 4);
}

}  // namespace
