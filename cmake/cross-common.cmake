# What cmake/aarch64.cmake and cmake/riscv64.cmake share: Debian's cross compilers for
# LK_CROSS_TRIPLET, the target's libraries where Debian puts them (multiarch: /usr/lib/TRIPLET and
# /usr/include; the cross libc: /usr/TRIPLET), pkg-config reading only the target's .pc files, and
# tests run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR, which CTest puts before each test).
#
# LK_CROSS_DEPS (optional): a prefix with libraries built for the target (the riscv64 cmocka of
# `make test-cross-riscv64`); it is searched first, by pkg-config and find_*().
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${LK_CROSS_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${LK_CROSS_TRIPLET}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${LK_CROSS_TRIPLET})

# try_compile() reads the toolchain file again in its own project: pass LK_CROSS_DEPS along.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES LK_CROSS_DEPS)
if(NOT LK_CROSS_DEPS AND DEFINED ENV{LK_CROSS_DEPS})
  set(LK_CROSS_DEPS $ENV{LK_CROSS_DEPS})
endif()

# find_*(): the cross libc's tree, the deps prefix, and multiarch's /usr (libraries only under
# /usr/lib/TRIPLET, since CMAKE_LIBRARY_ARCHITECTURE is set and the host's own directories are
# searched in their architecture's subdirectory only); programs from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${LK_CROSS_TRIPLET} ${LK_CROSS_DEPS})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Headers: /usr/include holds multiarch packages' headers for every architecture installed, so a
# header found there proves nothing about the target; modules check for the target's library too.
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)

# pkg-config: only the target's .pc files (multiarch's and the deps prefix's), never the host's.
set(lk_pc_libdir /usr/lib/${LK_CROSS_TRIPLET}/pkgconfig /usr/share/pkgconfig)
if(LK_CROSS_DEPS)
  list(PREPEND lk_pc_libdir ${LK_CROSS_DEPS}/lib/pkgconfig ${LK_CROSS_DEPS}/lib/${LK_CROSS_TRIPLET}/pkgconfig)
endif()
string(REPLACE ";" ":" lk_pc_libdir "${lk_pc_libdir}")
set(ENV{PKG_CONFIG_LIBDIR} "${lk_pc_libdir}")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

# CTest runs each test as `qemu-<arch>-static -L / -E LD_LIBRARY_PATH=/usr/TRIPLET/lib TEST`.
# Executables name the cross libc's dynamic loader at its path on this host
# (/usr/TRIPLET/lib/ld-linux-*) as their interpreter, so that qemu needs no prefix to find it, and
# -L / turns qemu's prefix lookup off (without -L it still looks in its built-in prefix): that
# lookup takes a lock of qemu's own around each absolute path a program uses, which fork() copies
# into the child held when another thread was looking one up, and the child's first absolute path
# then waits for ever. (The executables of this build therefore run under qemu on this host, not on
# a machine of the target.) The loader finds what is not in /usr/TRIPLET (multiarch's
# /usr/lib/TRIPLET, the deps prefix: the build's RPATH names it) at its own path. LD_LIBRARY_PATH
# keeps the loader's libc its own: the loader reads the host's /etc/ld.so.cache, which lists
# multiarch's libc6:arm64 (a libcmocka-dev:arm64 dependency) -- a libc of another Debian revision
# than libc6-arm64-cross's loader, with which the first pthread_create() hangs.
file(GLOB LK_CROSS_LOADER /usr/${LK_CROSS_TRIPLET}/lib/ld-linux-*.so.1)
if(NOT LK_CROSS_LOADER)
  message(FATAL_ERROR "no dynamic loader of the cross libc in /usr/${LK_CROSS_TRIPLET}/lib: install its libc6-dev-*-cross package")
endif()
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,--dynamic-linker=${LK_CROSS_LOADER}")
find_program(LK_CROSS_QEMU_PATH ${LK_CROSS_QEMU} REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${LK_CROSS_QEMU_PATH} -L / -E LD_LIBRARY_PATH=/usr/${LK_CROSS_TRIPLET}/lib)
