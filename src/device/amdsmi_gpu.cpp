// Placeholder: replaced by the AMD SMI backend.
#include "zeus/common/error.hpp"
#include "zeus/device/gpu_provider.hpp"

namespace zeus {

std::shared_ptr<GpuProvider> open_amdsmi(const std::string& library_path) {
  throw Error(ErrorKind::kLibraryNotFound, "AMD SMI backend not built yet (" + library_path + ")");
}

}  // namespace zeus
