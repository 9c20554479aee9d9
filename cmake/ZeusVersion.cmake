# The generated public headers: zeus/version.hpp (from project(zeus VERSION ...)) and
# zeus/export.hpp (ZEUS_EXPORT), written under ZEUS_GENERATED_INCLUDE_DIR and installed with
# include/zeus.
set(ZEUS_VERSION_MAJOR ${PROJECT_VERSION_MAJOR})
set(ZEUS_VERSION_MINOR ${PROJECT_VERSION_MINOR})
set(ZEUS_VERSION_PATCH ${PROJECT_VERSION_PATCH})
configure_file(${CMAKE_CURRENT_LIST_DIR}/version.hpp.in ${ZEUS_GENERATED_INCLUDE_DIR}/zeus/version.hpp
               @ONLY)
# The layers are static libraries (zeus_add_library); the header also holds for a shared build.
set(ZEUS_SHARED_LIBRARIES 0)
configure_file(${CMAKE_CURRENT_LIST_DIR}/export.hpp.in ${ZEUS_GENERATED_INCLUDE_DIR}/zeus/export.hpp
               @ONLY)
