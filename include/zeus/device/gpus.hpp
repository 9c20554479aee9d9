// The set of GPUs visible to this process, indexed as CUDA/HIP index them (after
// CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES masking).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "zeus/device/gpu.hpp"

namespace zeus::device {

class Gpus {
 public:
  Gpus() = default;
  // `physical_indices[i]` is the vendor-library index of `gpus[i]`.
  Gpus(std::vector<std::shared_ptr<Gpu>> gpus, std::vector<int> physical_indices);

  std::size_t size() const { return gpus_.size(); }
  bool empty() const { return gpus_.empty(); }

  // Throws Error(kInvalidArgument) naming the valid indices (or saying there is no GPU).
  Gpu& at(int index) const;
  std::shared_ptr<Gpu> shared(int index) const;
  int physical_index(int index) const;
  const std::vector<int>& physical_indices() const { return physical_indices_; }

  // Throws Error(kInvalidArgument) when the GPUs are not all the same model.
  void ensure_homogeneous() const;

 private:
  void check_index(int index) const;

  std::vector<std::shared_ptr<Gpu>> gpus_;
  std::vector<int> physical_indices_;
};

}  // namespace zeus::device
