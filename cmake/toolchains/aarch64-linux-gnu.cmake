# Cross-compiling for 64-bit Arm Linux (Grace Hopper, Grace Blackwell, GB10, Jetson) on a Debian 12
# x86_64 machine: Debian's cross toolchain (crossbuild-essential-arm64) and the arm64 multiarch
# -dev packages (libfmt-dev:arm64 and the others scripts/setup.sh names), which install their
# headers and libraries beside the host's, under /usr/include/aarch64-linux-gnu and
# /usr/lib/aarch64-linux-gnu. Debian's cross compilers search those multiarch folders themselves,
# so the sysroot stays "/". The `aarch64` preset (CMakePresets.json) uses this file; docs/arm.md
# says how the result is tested under qemu-user.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# GCC notes on every std::pair<double, double> passed by value that GCC 10.1 changed how aarch64
# passes such arguments; the whole build uses one compiler, so the note concerns nobody here.
set(CMAKE_CXX_FLAGS_INIT "-Wno-psabi")

# Libraries and headers: the target's multiarch folders only (never the host's x86_64 ones);
# programs (pkg-config, cmake's own helpers): the host's. Header-only packages that are
# architecture-independent (nlohmann-json, CLI11, pybind11) keep their CMake configs under
# /usr/share and /usr/lib/cmake, which the search still sees.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config answers from the arm64 .pc files (and the architecture-independent ones).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# Programs built here run under user-mode emulation (tests, the Python lookup of src/python).
find_program(ZEUS_QEMU_AARCH64 qemu-aarch64)
if(ZEUS_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${ZEUS_QEMU_AARCH64})
endif()
