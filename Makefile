# lowkey: the short commands. See README.md.
#
#   make demo           install build dependencies if missing (apt-get), build, then run the main demonstration (lowkey bench branch, then a
#                       program's probes traced from outside and summarized)
#   make test           install test dependencies if missing, build with -Werror, run every test
#   make test-asan      the tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-tsan      the tests under ThreadSanitizer
#   make test-portable  the tests with static keys built as load + branch (LK_KEYS_PORTABLE)
#   make test-compilers the tests of what users compile (keys, probes, C++) in each cell of the
#                       compiler matrix (MATRIX below)
#   make build-X, make check-X
#                       the two halves of make test-X (test, asan, tsan, portable, compilers): configure
#                       and build; run the tests
#   make test-cross-aarch64, make test-cross-riscv64
#                       cross-build with Debian's cross compilers (cmake/aarch64.cmake,
#                       cmake/riscv64.cmake) and run the tests under qemu-user (CROSS_SUITES below);
#                       make build-cross-X and check-cross-X are its two halves
#   make check-format   list the C and C++ files that are not as clang-format-16 writes them
#                       (.clang-format; tools/check-format --fix FILE... formats them)
#   make install        install under PREFIX (default /usr/local)

BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
# Tests run at once (ctest -j): most wait on processes, signals and the disk more than they compute.
TEST_JOBS ?= $(JOBS)
CMAKE ?= cmake
CMAKE_FLAGS ?=
CTEST_FLAGS ?= --output-on-failure --timeout 600

# Debian packages: deps/build.deps to build, deps/*.deps (one list per module) for the tests too;
# deps/cross-*.deps for the cross builds only.
read_deps = $(sort $(shell cat $(1) 2>/dev/null | sed 's/\#.*//'))
BUILD_DEPS = $(call read_deps,deps/build.deps)
DEPS = $(sort $(call read_deps,$(filter-out deps/cross-%,$(wildcard deps/*.deps))) $(EXTRA_DEPS))

configure = $(CMAKE) -S . -B $(1) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(2) $(CMAKE_FLAGS)

.PHONY: all build demo deps build-deps test test-asan test-tsan test-portable test-compilers install clean check-format \
	build-test build-asan build-tsan build-portable build-compilers \
	check-test check-asan check-tsan check-portable check-compilers \
	test-cross-aarch64 test-cross-riscv64 cross-deps-aarch64 cross-deps-riscv64 \
	build-cross-aarch64 build-cross-riscv64 check-cross-aarch64 check-cross-riscv64

all: build

build:
	$(call configure,$(BUILD),)
	$(CMAKE) --build $(BUILD) -j $(JOBS)

demo: build-deps build
	$(BUILD)/tools/lowkey/lowkey bench branch
	@echo
	@echo '$$ lowkey trace -o $(BUILD)/demo.ctf -- $(BUILD)/examples/example_probes   # a program with probes, traced from outside'
	@$(BUILD)/tools/lowkey/lowkey trace -o $(BUILD)/demo.ctf -- $(BUILD)/examples/example_probes
	@echo '$$ lowkey report $(BUILD)/demo.ctf'
	@$(BUILD)/tools/lowkey/lowkey report $(BUILD)/demo.ctf

# Installs the packages named in $(1) that are missing (as root, or through sudo).
define install_missing
	@missing=""; \
	for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$missing; \
	fi
endef

build-deps:
	$(call install_missing,$(BUILD_DEPS))

deps:
	$(call install_missing,$(DEPS))

# build_tests(DIR, CMAKE ARGS, BUILD TARGETS): configure and build (everything where no target is
# named); check_tests(DIR, CTEST ARGS): run the tests. Each test target below is its build-* then its
# check-* target: .ci/run builds the other trees one after the other, at the lowest priority, while
# the tests of those built run (they leave CPU time idle: they wait on processes, signals, the disk).
define build_tests
	$(call configure,$(1),-DLK_WERROR=ON -DLK_BUILD_TESTS=ON -DLK_REQUIRE_TESTS=ON $(2))
	$(CMAKE) --build $(1) -j $(JOBS) $(3)
endef
define check_tests
	cd $(1) && ctest $(CTEST_FLAGS) -j $(TEST_JOBS) $(2)
endef

# Builds that run some suites only (CTest labels: each test carries its folder's name, some more):
# the CTest label option and the build targets (everything outside tests/, and those labels' test
# programs: tests-LABEL) for a list of labels; for an empty list, nothing (every test, the whole
# build).
empty :=
space := $(empty) $(empty)
suite_labels = $(if $(strip $(1)),-L '^($(subst $(space),|,$(strip $(1))))$$')
suite_targets = $(if $(strip $(1)),--target all-but-tests $(addprefix tests-,$(strip $(1))))

test: build-test
	$(call check_tests,$(BUILD),)
build-test: deps
	$(call build_tests,$(BUILD),)
check-test:
	$(call check_tests,$(BUILD),)

# The header hygiene tests compile the headers on their own, the same in every build: `make test`
# runs them, the other builds leave them out.
NOT_HEADERS = -E '^test_header_hygiene'

# The libFuzzer builds of the fuzz harnesses (label fuzz) are the host clang's with their own flags
# in every build, run from fixed seeds: `make test` builds and runs them, the other builds leave
# them out (LK_LIBFUZZER=OFF) and replay the corpora through their own code (test_*_replay).
NOT_LIBFUZZER = -DLK_LIBFUZZER=OFF

ASAN_CMAKE = -DLK_SANITIZE=address$(,)undefined -DCMAKE_BUILD_TYPE=Debug $(NOT_LIBFUZZER)
ASAN_CTEST = -LE no-asan $(NOT_HEADERS)

test-asan: build-asan
	$(call check_tests,$(BUILD)-asan,$(ASAN_CTEST))
build-asan: deps
	$(call build_tests,$(BUILD)-asan,$(ASAN_CMAKE))
check-asan:
	$(call check_tests,$(BUILD)-asan,$(ASAN_CTEST))

# ThreadSanitizer finds races between threads: it builds and runs the suites of the modules whose
# threads share memory (TSAN_SUITES: the keys' flips, the probes' rings and consumer, the control
# socket's server, watchpoints' dispatch, locks, semaphore sets, clocks, counters and core, the
# OTLP exporter's queue between its callers and its thread, and races_table: the lock-free table
# of heap blocks that `lowkey races --heap` shares between a program's threads, whose test alone
# is labelled so: the rest of the races suite preloads libraries never built with sanitizers into
# programs that are not, and is left out with its programs). Left
# to the other builds (ASan and UBSan among them), since what they run is one thread in one
# process or processes apart:
#  - the suites cli, cxx, html and fuzz: the command line's texts and rules, C++ sites that compile
#    the same as C's, the pages' escaping, the decoders' fuzz replays and mutations; the commands
#    that run threads (trace, stat, locks, watch) have tests in the suites run here;
#  - tests labelled no-tsan in those suites (processes racing each other, which it cannot see).
TSAN_SUITES ?= core key probe control watch lock sem clock counter otlp races_table
TSAN_CMAKE = -DLK_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug $(NOT_LIBFUZZER)
TSAN_CTEST = $(call suite_labels,$(TSAN_SUITES)) -LE no-tsan $(NOT_HEADERS)
# A forked child of a process with USDT sites starts the library's watcher thread again (as
# LTTng-UST's listeners are), which ThreadSanitizer's runtime refuses by default in the child of a
# threaded process (it cannot follow threads made there): die_after_fork=0 lets it run.
# The runtime's main thread sleeps before exiting (atexit_sleep_ms, 1000 by default) so that the
# other threads' last accesses meet what exit does; the tests start hundreds of processes, which
# spent most of their time in that second: 100 ms still gives the library's threads (the watcher
# wakes every 50 ms) their turn.
TSAN_ENV = export TSAN_OPTIONS="die_after_fork=0 atexit_sleep_ms=100 $${TSAN_OPTIONS:-}";

test-tsan: build-tsan
	$(TSAN_ENV) $(call check_tests,$(BUILD)-tsan,$(TSAN_CTEST))
build-tsan: deps
	$(call build_tests,$(BUILD)-tsan,$(TSAN_CMAKE),$(call suite_targets,$(TSAN_SUITES)))
check-tsan:
	$(TSAN_ENV) $(call check_tests,$(BUILD)-tsan,$(TSAN_CTEST))

# The portable build changes the static keys (key.h's sites, src/key, core's sync) and nothing
# else: it builds and runs the suites whose code has keys or sites (PORTABLE_SUITES), not those of
# counter, lock, sem and clock, which hold none and call nothing that flips one, nor html (the
# pages' escaping and their rendering in Chromium, from traces recorded as in make test), nor the
# tests of those suites labelled no-portable (code without keys, such as reading a trace).
PORTABLE_SUITES ?= core key probe control cli cxx watch fuzz
PORTABLE_CTEST = $(call suite_labels,$(PORTABLE_SUITES)) -LE no-portable $(NOT_HEADERS)

test-portable: build-portable
	$(call check_tests,$(BUILD)-portable,$(PORTABLE_CTEST))
build-portable: deps
	$(call build_tests,$(BUILD)-portable,-DLK_KEYS_PORTABLE=ON $(NOT_LIBFUZZER),$(call suite_targets,$(PORTABLE_SUITES)))
check-portable:
	$(call check_tests,$(BUILD)-portable,$(PORTABLE_CTEST))

# The compiler matrix: CC,CXX,C standard,C++ standard,linker[,portable] per cell (c11: strict
# ISO; gnu11: with GNU extensions; bfd, lld or mold; portable: the static keys as load + branch,
# LK_KEYS_PORTABLE). The library is built as always; the tests -- the users' side of the headers
# -- in the cell's standards. With `make test` (gcc, gnu11, gnu++17, bfd) each compiler meets both
# C dialects and both C++ standards; test_header_hygiene compiles the headers in every standard.
# The portable cell runs the key, probe and C++ tests with the keys that architectures without
# patching get, and the key stress test (tests/key); make test-portable runs every suite that way.
# build-compilers configures and builds every cell, check-compilers tests them, test-compilers
# does both cell by cell.
MATRIX ?= gcc,g++,c11,c++20,mold clang,clang++,c11,c++17,bfd clang,clang++,gnu11,gnu++20,lld,portable

# The shell loop over the cells: $$dir, $$cc ... set for the commands in $(1). $$clis: the command
# lines built so far, as COMPILER=PATH (the compiler's real path), make test's first where built.
define each_cell
	@set -e; clis=; \
	if [ -x $(BUILD)/tools/lowkey/lowkey ] && [ -f $(BUILD)/CMakeCache.txt ]; then \
		clis="$$(readlink -f $$(sed -n 's/^CMAKE_C_COMPILER:FILEPATH=//p' $(BUILD)/CMakeCache.txt))=$(abspath $(BUILD))/tools/lowkey/lowkey"; \
	fi; \
	for cell in $(MATRIX); do \
		set -- $$(echo $$cell | tr , ' '); \
		cstd=$${3#c}; cstd=$${cstd#gnu}; cext=OFF; case $$3 in gnu*) cext=ON;; esac; \
		xstd=$${4#c++}; xstd=$${xstd#gnu++}; xext=OFF; case $$4 in gnu*) xext=ON;; esac; \
		ld=-fuse-ld=$$5; dir=$(BUILD)-$$1-$$3-$$4$${6:+-$$6}; keys=OFF; [ "$${6:-}" != portable ] || keys=ON; \
		echo "--- $$1 -std=$$3, $$2 -std=$$4, $$ld$${6:+, $$6 keys} ($$dir; $$($$1 --version | head -1))"; \
		$(1) \
	done
endef
# A cell runs the command line of a build by its compiler made before it (LK_CLI, CMakeLists.txt):
# the CLI reads what the tests record, and is built and tested in make test (GCC) and once with
# Clang; the cells' subject is the users' side of the headers.
build_cell = real=$$(readlink -f $$(command -v $$1)); cli=; \
		for e in $$clis; do case $$e in "$$real="*) cli=$${e\#*=}; break;; esac; done; \
		CC=$$1 CXX=$$2 $(call configure,$$dir,-DLK_WERROR=ON -DLK_BUILD_TESTS=ON -DLK_REQUIRE_TESTS=ON \
			-DLK_TEST_C_STANDARD=$$cstd -DLK_TEST_C_EXTENSIONS=$$cext \
			-DLK_TEST_CXX_STANDARD=$$xstd -DLK_TEST_CXX_EXTENSIONS=$$xext \
			-DCMAKE_EXE_LINKER_FLAGS=$$ld -DCMAKE_SHARED_LINKER_FLAGS=$$ld \
			-DCMAKE_MODULE_LINKER_FLAGS=$$ld -DLK_KEYS_PORTABLE=$$keys -DLK_CLI=$$cli) >/dev/null; \
		echo "command line: $${cli:-built here}"; \
		$(CMAKE) --build $$dir -j $(JOBS) --target compiler-tests; \
		[ -n "$$cli" ] || clis="$$clis $$real=$(abspath $$dir)/tools/lowkey/lowkey";
check_cell = (cd $$dir && ctest $(CTEST_FLAGS) -j $(TEST_JOBS) -L compilers);

test-compilers: deps
	$(call each_cell,$(build_cell) $(check_cell))
build-compilers: deps
	$(call each_cell,$(build_cell))
check-compilers:
	$(call each_cell,$(check_cell))

# Cross builds: aarch64 and riscv64, configured with cmake/<arch>.cmake (on the first configure of
# the directory: the cache keeps it) into $(BUILD)-<arch>, built with -Werror, tested under
# qemu-user (CTest puts the toolchain file's CMAKE_CROSSCOMPILING_EMULATOR before each test).
# CROSS_SUITES: the test labels built and run there (a test's folder under tests/, or a label it
# is given: arch, the watch module's length rules), beside everything outside tests/ (target
# all-but-tests); empty: every test.
# CROSS_CTEST_FLAGS for more (-R, -E ...). A test that needs what qemu-user lacks (perf_event_open,
# seccomp, robust futex lists, executing other programs of the target without binfmt_misc) skips,
# saying why.
CROSS_SUITES ?= core key clock probe cxx arch
CROSS_CTEST_FLAGS ?=
CROSS_DEPS_RISCV64 = $(BUILD)-riscv64-deps
SUDO_IF = $$(if [ "$$(id -u)" = 0 ]; then echo; else echo sudo; fi)

define build_cross
	$(CMAKE) -S . -B $(BUILD)-$(1) -G Ninja $(if $(wildcard $(BUILD)-$(1)/CMakeCache.txt),,--toolchain cmake/$(1).cmake) \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DLK_WERROR=ON -DLK_BUILD_TESTS=ON -DLK_REQUIRE_TESTS=ON $(2) $(CMAKE_FLAGS)
	$(CMAKE) --build $(BUILD)-$(1) -j $(JOBS) $(call suite_targets,$(CROSS_SUITES))
endef
check_cross = cd $(BUILD)-$(1) && ctest $(CTEST_FLAGS) -j $(TEST_JOBS) $(call suite_labels,$(CROSS_SUITES)) $(CROSS_CTEST_FLAGS)

cross-deps-aarch64:
	@dpkg --print-foreign-architectures | grep -qx arm64 || $(SUDO_IF) dpkg --add-architecture arm64
	$(call install_missing,$(call read_deps,deps/cross-aarch64.deps))

test-cross-aarch64: build-cross-aarch64
	$(call check_cross,aarch64)
build-cross-aarch64: cross-deps-aarch64
	$(call build_cross,aarch64,)
check-cross-aarch64:
	$(call check_cross,aarch64)

# cmocka for riscv64, from Debian's source package (deb-src enabled for it if need be), built with
# the cross compiler into $(CROSS_DEPS_RISCV64)/install: a build directory, never the source tree.
# Its packages are the cross compiler alone (no foreign architecture, nothing of the host's
# changes): it may be built while other tests run.
cross-deps-riscv64:
	$(call install_missing,$(call read_deps,deps/cross-riscv64.deps))
	@set -e; d=$(CROSS_DEPS_RISCV64); \
	if [ ! -f $$d/install/lib/pkgconfig/cmocka.pc ]; then \
		if ! apt-cache showsrc cmocka 2>/dev/null | grep -q '^Package: cmocka'; then \
			echo "enabling Debian's source packages (/etc/apt/sources.list.d/lowkey-deb-src.sources)"; \
			printf '%s\n' "# Added by lowkey's make test-cross-riscv64: source packages, to cross-build cmocka." \
				'Types: deb-src' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm' 'Components: main' \
				'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' | \
				$(SUDO_IF) tee /etc/apt/sources.list.d/lowkey-deb-src.sources >/dev/null; \
			$(SUDO_IF) apt-get update -q; \
		fi; \
		rm -rf $$d; mkdir -p $$d; \
		(cd $$d && apt-get source -q cmocka); \
		$(CMAKE) -S $$(ls -d $$d/cmocka-*/ | head -1) -B $$d/build -G Ninja -DCMAKE_SYSTEM_NAME=Linux \
			-DCMAKE_SYSTEM_PROCESSOR=riscv64 -DCMAKE_C_COMPILER=riscv64-linux-gnu-gcc \
			-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=$$(pwd)/$$d/install \
			-DCMAKE_INSTALL_LIBDIR=lib -DWITH_EXAMPLES=OFF -DUNIT_TESTING=OFF >/dev/null; \
		$(CMAKE) --build $$d/build --target install >/dev/null; \
	fi

test-cross-riscv64: build-cross-riscv64
	$(call check_cross,riscv64)
build-cross-riscv64: cross-deps-riscv64
	$(call build_cross,riscv64,-DLK_CROSS_DEPS=$(abspath $(CROSS_DEPS_RISCV64))/install)
check-cross-riscv64:
	$(call check_cross,riscv64)

check-format:
	$(call install_missing,$(call read_deps,deps/format.deps))
	tools/check-format

install: build
	$(CMAKE) --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-portable $(BUILD)-*-c* \
		$(BUILD)-aarch64 $(BUILD)-riscv64 $(BUILD)-riscv64-deps

, := ,
