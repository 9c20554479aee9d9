// The batch-size optimizer's training callback moved beside the power-limit optimizer's:
// zeus/runtime/batch_size_optimizer.hpp. This header keeps the earlier include path working.
#pragma once

#include "zeus/runtime/batch_size_optimizer.hpp"
