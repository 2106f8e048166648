# Cross-building lowkey for 64-bit RISC-V (riscv64, RV64GC, lp64d) with Debian's cross compilers,
# tests run under qemu-user:
#   cmake -S . -B build-riscv64 --toolchain cmake/riscv64.cmake -DLK_CROSS_DEPS=DIR
#   cd build-riscv64 && ctest        # each test runs as qemu-riscv64-static -L / TEST (cross-common.cmake)
# Packages (deps/cross-riscv64.deps): gcc-riscv64-linux-gnu, g++-riscv64-linux-gnu,
# libc6-dev-riscv64-cross, qemu-user-static. Debian 12 has no riscv64 packages of the libraries:
# `make test-cross-riscv64` cross-builds cmocka from Debian's source package and installs it under
# LK_CROSS_DEPS (build-riscv64-deps/install); libpfm4, libdw and libelf are missing, so the
# modules and CLI parts that need them are left out (configure says which).
set(LK_CROSS_TRIPLET riscv64-linux-gnu)
set(LK_CROSS_QEMU qemu-riscv64-static)
set(CMAKE_SYSTEM_PROCESSOR riscv64)
include(${CMAKE_CURRENT_LIST_DIR}/cross-common.cmake)
