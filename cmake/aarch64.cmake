# Cross-building lowkey for 64-bit Arm (aarch64) with Debian's cross compilers, tests run under
# qemu-user:
#   cmake -S . -B build-aarch64 --toolchain cmake/aarch64.cmake && cmake --build build-aarch64
#   cd build-aarch64 && ctest        # each test runs as qemu-aarch64-static -L / TEST (cross-common.cmake)
# Packages (make test-cross-aarch64 installs them; deps/cross-aarch64.deps): gcc-aarch64-linux-gnu,
# g++-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user-static, and the libraries through
# multiarch (dpkg --add-architecture arm64): libcmocka-dev:arm64, libpfm4-dev:arm64,
# libdw-dev:arm64, libelf-dev:arm64.
set(LK_CROSS_TRIPLET aarch64-linux-gnu)
set(LK_CROSS_QEMU qemu-aarch64-static)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
include(${CMAKE_CURRENT_LIST_DIR}/cross-common.cmake)
