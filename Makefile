# lowkey: the short commands. See README.md.
#
#   make demo           install build dependencies if missing (apt-get), build, then run the main demonstration (lowkey bench branch, then a
#                       program's probes traced from outside and summarized)
#   make test           install test dependencies if missing, build with -Werror, run every test
#   make test-asan      the tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-tsan      the tests under ThreadSanitizer
#   make test-portable  the tests with static keys built as load + branch (LK_KEYS_PORTABLE)
#   make install        install under PREFIX (default /usr/local)

BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
CMAKE ?= cmake
CMAKE_FLAGS ?=
CTEST_FLAGS ?= --output-on-failure --timeout 600

# Debian packages: deps/build.deps to build, deps/*.deps (one list per module) for the tests too.
read_deps = $(sort $(shell cat $(1) 2>/dev/null | sed 's/\#.*//'))
BUILD_DEPS = $(call read_deps,deps/build.deps)
DEPS = $(sort $(call read_deps,deps/*.deps) $(EXTRA_DEPS))

configure = $(CMAKE) -S . -B $(1) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(2) $(CMAKE_FLAGS)

.PHONY: all build demo deps build-deps test test-asan test-tsan test-portable install clean

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

define run_tests
	$(call configure,$(1),-DLK_WERROR=ON -DLK_BUILD_TESTS=ON -DLK_REQUIRE_TESTS=ON $(2))
	$(CMAKE) --build $(1) -j $(JOBS)
	cd $(1) && ctest $(CTEST_FLAGS) -j $(JOBS) $(3)
endef

test: deps
	$(call run_tests,$(BUILD),)

test-asan: deps
	$(call run_tests,$(BUILD)-asan,-DLK_SANITIZE=address$(,)undefined -DCMAKE_BUILD_TYPE=Debug,-LE no-asan)

test-tsan: deps
	$(call run_tests,$(BUILD)-tsan,-DLK_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug,-LE no-tsan)

test-portable: deps
	$(call run_tests,$(BUILD)-portable,-DLK_KEYS_PORTABLE=ON,)

install: build
	$(CMAKE) --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-portable

, := ,
