# The two commands of the README: `make demo` and `make check`.
# Everything else is plumbing around Meson (build/) and the dependency script.
BUILD ?= build
MESON_OPTS ?=
# make check LOAD=N: the suite with N CPU hogs beside it (scripts/check.sh)
LOAD ?= 0
# the fuzzers' build: clang, ASan+UBSan, libFuzzer (docs/fuzzing.md)
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 5

.PHONY: all deps deps-test build demo check check-asan fuzz fuzz-smoke bench clean

all: build

deps:
	@scripts/deps.sh

deps-test:
	@scripts/deps.sh --test

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

demo: build
	@scripts/demo.sh $(BUILD)

check: deps-test $(BUILD)/build.ninja
	ninja -C $(BUILD)
	@LOAD=$(LOAD) scripts/check.sh $(BUILD)

# the same suite under AddressSanitizer and UndefinedBehaviorSanitizer
check-asan: deps-test
	@[ -f build-asan/build.ninja ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false
	ninja -C build-asan
	@LOAD=$(LOAD) ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 scripts/check.sh build-asan

# one libFuzzer target per parser of outside input: $(FUZZ_BUILD)/fuzz/fuzz-*
fuzz: deps-test
	@[ -f $(FUZZ_BUILD)/build.ninja ] || CC=clang-14 meson setup $(FUZZ_BUILD) --werror -Dfuzz=true \
		-Db_sanitize=address,undefined -Db_lundef=false
	ninja -C $(FUZZ_BUILD) fuzz

# every target over its corpus (fuzz/corpus/) and fuzz/regress/, then FUZZ_SECONDS of fuzzing each
fuzz-smoke: fuzz
	@fuzz/smoke.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

bench: build
	@bench/run.sh $(BUILD)
	@bench/callgraph.sh $(BUILD)
	@bench/annotate.sh $(BUILD)
	@bench/symbols.sh $(BUILD)
	@bench/html.sh $(BUILD)
	@bench/archive.sh $(BUILD)
	@bench/daemon.sh $(BUILD)
	@bench/merge.sh $(BUILD)
	@bench/daemon-cpu.sh $(BUILD)
	@bench/scale.sh $(BUILD)

clean:
	rm -rf $(BUILD) build-asan $(FUZZ_BUILD)
