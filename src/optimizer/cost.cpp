#include "zeus/optimizer/cost.hpp"

#include <string>

#include "zeus/common/error.hpp"

namespace zeus::optimizer {

void check_eta(double eta) {
  if (!(eta >= 0.0 && eta <= 1.0)) {
    throw Error(ErrorKind::kInvalidArgument, "eta must be between 0 and 1 (got " +
                                                 std::to_string(eta) +
                                                 "): 1 minimises energy only, 0 time only");
  }
}

}  // namespace zeus::optimizer
