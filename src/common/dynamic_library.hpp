// A shared library opened at run time with dlopen.
#pragma once

#include <memory>
#include <string>

namespace zeus {

class DynamicLibrary {
 public:
  // Opens `path` (a file name searched the usual way, or a path). Throws
  // Error(kLibraryNotFound) carrying dlerror()'s text when it cannot be loaded.
  static std::shared_ptr<DynamicLibrary> open(const std::string& path);

  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // The address of `name`, or nullptr when the library does not export it.
  void* symbol(const char* name) const;
  const std::string& requested_path() const { return requested_path_; }
  // The file actually loaded (from dladdr/dlinfo), or the requested path when unknown.
  std::string resolved_path() const;

 private:
  DynamicLibrary(void* handle, std::string requested_path)
      : handle_(handle), requested_path_(std::move(requested_path)) {}
  void* handle_;
  std::string requested_path_;
};

}  // namespace zeus
