#include "common/dynamic_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include "zeus/common/error.hpp"

namespace zeus {

std::shared_ptr<DynamicLibrary> DynamicLibrary::open(const std::string& path) {
  dlerror();  // clear any stale message
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    throw Error(ErrorKind::kLibraryNotFound,
                "cannot load " + path + ": " + (reason != nullptr ? reason : "unknown reason"));
  }
  return std::shared_ptr<DynamicLibrary>(new DynamicLibrary(handle, path));
}

DynamicLibrary::~DynamicLibrary() {
  dlclose(handle_);
}

void* DynamicLibrary::symbol(const char* name) const {
  return dlsym(handle_, name);
}

std::string DynamicLibrary::resolved_path() const {
  link_map* map = nullptr;
  if (dlinfo(handle_, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return requested_path_;
}

}  // namespace zeus
