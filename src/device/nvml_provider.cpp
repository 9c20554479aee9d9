// NVML device discovery: the GpuProvider over one loaded NVML library, which counts devices,
// reads driver and library versions, and hands out one Gpu per NVML index. open_nvml lives here.
#include <array>
#include <memory>
#include <string>
#include <utility>

#include "common/dynamic_library.hpp"
#include "nvml_library.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpu_provider.hpp"

namespace zeus::device {
namespace {

class NvmlProvider final : public GpuProvider {
 public:
  explicit NvmlProvider(std::shared_ptr<nvml::Library> library) : nvml_(std::move(library)) {}

  GpuBackend backend() const override { return GpuBackend::kNvml; }
  std::string library_path() const override { return nvml_->resolved_path(); }
  std::string driver_version() override {
    return version_string(nvml_->fn().nvmlSystemGetDriverVersion);
  }
  std::string library_version() override {
    return version_string(nvml_->fn().nvmlSystemGetNVMLVersion);
  }
  int device_count() override { return nvml_->device_count(); }
  std::string device_uuid(int physical_index) override {
    return nvml_->device_uuid(physical_index);
  }
  std::shared_ptr<Gpu> open_gpu(int physical_index) override {
    return nvml::make_gpu(nvml_, physical_index);
  }

 private:
  static std::string version_string(nvml::Return (*getter)(char*, unsigned)) {
    if (getter == nullptr) {
      return "";
    }
    std::array<char, nvml::kVersionBufferSize> buffer{};
    if (getter(buffer.data(), buffer.size()) != nvml::kSuccess) {
      return "";
    }
    return buffer.data();
  }

  std::shared_ptr<nvml::Library> nvml_;
};

}  // namespace

std::shared_ptr<GpuProvider> open_nvml(const std::string& library_path) {
  std::shared_ptr<DynamicLibrary> library;
  try {
    library = DynamicLibrary::open(library_path);
  } catch (const Error& error) {
    throw Error(error.kind(), error.what(), ErrorSubject::kGpu);
  }
  return std::make_shared<NvmlProvider>(std::make_shared<nvml::Library>(std::move(library)));
}

}  // namespace zeus::device
