#include "zeus/device/gpus.hpp"

#include "zeus/common/error.hpp"

namespace zeus::device {

Gpus::Gpus(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<int> physical_indices)
    : gpus_(std::move(gpus)), physical_indices_(std::move(physical_indices)) {
  if (gpus_.size() != physical_indices_.size()) {
    throw Error(ErrorKind::kInvalidArgument, "Gpus: one physical index is needed per GPU",
                ErrorSubject::kGpu);
  }
}

void Gpus::check_index(int index) const {
  if (index >= 0 && static_cast<std::size_t>(index) < gpus_.size()) {
    return;
  }
  if (gpus_.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "GPU index " + std::to_string(index) + " is invalid: no GPU is available",
                ErrorSubject::kGpu);
  }
  std::string valid = gpus_.size() == 1 ? "0" : "0.." + std::to_string(gpus_.size() - 1);
  throw Error(ErrorKind::kInvalidArgument,
              "GPU index " + std::to_string(index) + " is invalid: valid indices are " + valid +
                  " (indices count the GPUs visible through CUDA_VISIBLE_DEVICES / "
                  "HIP_VISIBLE_DEVICES)",
              ErrorSubject::kGpu);
}

Gpu& Gpus::at(int index) const {
  check_index(index);
  return *gpus_[static_cast<std::size_t>(index)];
}

std::shared_ptr<Gpu> Gpus::shared(int index) const {
  check_index(index);
  return gpus_[static_cast<std::size_t>(index)];
}

int Gpus::physical_index(int index) const {
  check_index(index);
  return physical_indices_[static_cast<std::size_t>(index)];
}

void Gpus::ensure_homogeneous() const {
  if (gpus_.empty()) {
    return;
  }
  const std::string first = gpus_.front()->name();
  for (std::size_t i = 1; i < gpus_.size(); ++i) {
    const std::string other = gpus_[i]->name();
    if (other != first) {
      throw Error(ErrorKind::kInvalidArgument,
                  "GPUs are not all the same model: GPU 0 is " + first + " but GPU " +
                      std::to_string(i) + " is " + other,
                  ErrorSubject::kGpu);
    }
  }
}

}  // namespace zeus::device
