# Warren: the two commands are `make run` and `make test`.
#   make build      build into build/ (no tests)
#   make run        install what is missing, build, start warrend in the
#                   foreground on a local state dir (.state/) and the
#                   default socket unix:/run/warren/warren.sock
#   make test       install what is missing, build (normal and ASan+UBSan),
#                   run every test under both builds, the e2e suite once
#                   more privilege-separated and dropped (test-e2e-drop),
#                   and the K8S suite
#   make test-fast  unit + e2e tests on the normal build only
#   make bench      build and run the benchmarks under bench/
#   make test-k8s   the K8S compute class suite against a real single-node
#                   cluster (binaries built once by scripts/k8s-build.sh,
#                   ~12 min of two cores, cached in ~/.cache/warren/k8s/)

BUILD      ?= build
ASAN_BUILD ?= build-asan
PYTHON     ?= python3
STATE_DIR  ?= $(CURDIR)/.state
LISTEN     ?= unix:/run/warren/warren.sock
PYTEST_ARGS ?=

.PHONY: all deps build build-asan run test test-fast test-unit test-e2e test-e2e-drop test-asan test-fuzz fuzz bench clean format test-k8s bench-k8s

all: build

deps:
	@scripts/deps.sh
	@scripts/warren-user.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) --buildtype=debugoptimized >/dev/null

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) --buildtype=debug -Dsanitize=true -Db_lundef=false >/dev/null

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

build-asan: $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)

run: deps build
	exec scripts/run.sh $(BUILD) $(STATE_DIR) $(LISTEN)

test-unit:
	meson test -C $(BUILD) --suite unit --print-errorlogs

test-e2e:
	WARREN_BUILD=$(CURDIR)/$(BUILD) PYTHONPATH=$(CURDIR)/python $(PYTHON) -m pytest -q tests/e2e $(PYTEST_ARGS)
	WARREN_BUILD=$(CURDIR)/$(BUILD) $(PYTHON) -m pytest -q tests/init tests/runtime $(PYTEST_ARGS)
	PYTHONPATH=$(CURDIR)/python $(PYTHON) -m pytest -q python/tests $(PYTEST_ARGS)
	$(PYTHON) -m pytest -q tests/fakenet $(PYTEST_ARGS)
	WARREN_BUILD=$(CURDIR)/$(BUILD) $(PYTHON) -m pytest -q tests/egress $(PYTEST_ARGS)
	WARREN_BUILD=$(CURDIR)/$(BUILD) $(PYTHON) -m pytest -q tests/signer $(PYTEST_ARGS)

# The e2e suite again with every daemon privilege-separated and dropped
# (--privsep --user warren, what `make run` starts: docs/privsep.md).
test-e2e-drop:
	WARREN_DROP=1 WARREN_BUILD=$(CURDIR)/$(BUILD) PYTHONPATH=$(CURDIR)/python $(PYTHON) -m pytest -q tests/e2e $(PYTEST_ARGS)

test-fast: deps build test-unit test-e2e

test-asan: build-asan
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  meson test -C $(ASAN_BUILD) --suite unit --print-errorlogs
	WARREN_BUILD=$(CURDIR)/$(ASAN_BUILD) WARREN_SANITIZED=1 PYTHONPATH=$(CURDIR)/python \
	  $(PYTHON) -m pytest -q tests/e2e -m "not slow" $(PYTEST_ARGS)
	WARREN_BUILD=$(CURDIR)/$(ASAN_BUILD) $(PYTHON) -m pytest -q tests/init $(PYTEST_ARGS)
	WARREN_BUILD=$(CURDIR)/$(ASAN_BUILD) WARREN_SANITIZED=1 $(PYTHON) -m pytest -q tests/runtime $(PYTEST_ARGS)

# Every daemon a test starts pulls only from loopback registries: nothing
# a test does may leave the machine (the e2e fixtures set it too).
test test-fast test-unit test-e2e test-e2e-drop test-asan test-k8s bench-k8s: export WARREN_PULL_LOOPBACK_ONLY = 1

# A short smoke run of every fuzzer in `make test`; `make fuzz` runs longer.
FUZZ_SECONDS ?= 5
test-fuzz:
	scripts/fuzz.sh $(FUZZ_SECONDS)

fuzz: deps
	scripts/fuzz.sh 60

test: deps build test-unit test-e2e test-e2e-drop test-asan test-fuzz test-k8s

bench: deps build
	bench/run.sh $(BUILD)

# Part of `make test` (docs/k8s.md has the times it adds: ~3.5 min with
# the binaries cached, plus their one-time build on a fresh machine).
test-k8s: deps build
	scripts/k8s-build.sh >/dev/null
	WARREN_BUILD=$(CURDIR)/$(BUILD) PYTHONPATH=$(CURDIR)/python $(PYTHON) -m pytest -q tests/k8s $(PYTEST_ARGS)

bench-k8s: deps build
	scripts/k8s-build.sh >/dev/null
	WARREN_BUILD=$(CURDIR)/$(BUILD) PYTHONPATH=$(CURDIR)/python $(PYTHON) bench/k8s/run.py

format:
	git ls-files '*.c' '*.h' | grep -v pb-c | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
