# bitnet_go — every command a developer or CI needs. See README.md.
#
#   make demo    set up (Python venv, Go library, package) and run the demo
#   make test    everything CI runs: Go (also -tags noasm, fuzz), ruff, pytest (notebooks
#                included), a short bench run
#   make bench   the benchmark suite (python -m bitnet_go bench)
#   make wheel   build the py3-none-manylinux_2_NN_<arch> wheel into dist/
#
# The Python environment (numpy, pytest, torch, ruff, matplotlib, the notebook tools) lives in
# ~/.cache/bitnet_go/venv-<hash of requirements-dev.txt>: created when missing,
# reused afterwards (torch is a few GB). Set VENV=... to use another one.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
PYTHON ?= python3
REQ := requirements-dev.txt
VENV_HASH := $(shell sha256sum $(REQ) | cut -c1-12)
VENV ?= $(HOME)/.cache/bitnet_go/venv-$(VENV_HASH)
PY := $(VENV)/bin/python
LIB := python/bitnet_go/libbitnet_go.so
FUZZTIME ?= 5s
# An execution count, not a duration: this target's inputs are slow enough that a
# time limit can expire mid-input, which go test reports as a failure
# ("context deadline exceeded") with no failing input.
SPEC_FUZZ_EXECS ?= 30000x
GO_SOURCES := $(shell find bindings gokern cuda -name '*.go' -o -name '*.s' -o -name '*.c' -o -name '*.ptx' 2>/dev/null) go.mod go.sum

.PHONY: help venv lib ptx generate check-generate install demo test test-go test-go-noasm fuzz lint test-py test-notebooks bench bench-smoke wheel clean

help:
	@sed -n '2,12p' Makefile

venv: $(VENV)/.complete

# Keyed by the content hash in $(VENV)'s name, not by timestamps: a fresh clone
# (new mtimes) reuses the environment; an edit to $(REQ) names a new one.
$(VENV)/.complete: | $(REQ)
	@echo "bitnet_go: creating the Python environment $(VENV) (torch is large: this takes a while once)"
	rm -rf "$(VENV)"
	$(PYTHON) -m venv "$(VENV)"
	"$(PY)" -m pip install -q --upgrade pip
	"$(PY)" -m pip install --progress-bar off -r $(REQ)
	touch "$@"

lib: $(LIB)

# The go build command line (stripped: -ldflags=-s -w) is setup.py's, the one
# the wheel uses; build_go_library needs only the standard library.
$(LIB): $(GO_SOURCES) setup.py
	GO=$(GO) $(PYTHON) -c 'import setup, sys; setup.build_go_library(setup.Path(sys.argv[1]))' $(LIB)

# Regenerates cuda/*.ptx (checked in) with NVRTC from PyPI; normal builds need no CUDA toolkit.
ptx:
	bash cuda/build_ptx.sh

# Regenerates the amd64 assembly of every package (avo, _gen at the repository
# root: its own module) and checks that the checked-in files are what the
# generator writes.
generate:
	$(GO) -C _gen run -tags generate .

check-generate:
	$(GO) -C _gen vet -tags generate .
	$(GO) -C _gen run -tags generate . -check

# Installs the package (non-editable, like a user's pip install) into the venv.
install: venv
	"$(PY)" -m pip install -q --no-deps --no-build-isolation --force-reinstall .

demo: install
	cd /tmp && "$(PY)" -m bitnet_go demo

test: test-go test-go-noasm check-generate fuzz lint test-py bench-smoke

# test-go ends with the concurrency packages under the race detector (fast,
# with checkptr); `go test -race ./gokern/...` covers the kernels too, in a
# few minutes.
test-go:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test ./...
	$(GO) test -race ./gokern/par ./gokern/buf

test-go-noasm:
	$(GO) vet -tags noasm ./...
	$(GO) test -tags noasm ./...

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzQuantize$$' -fuzztime $(FUZZTIME) ./gokern/ternary
	$(GO) test -run '^$$' -fuzz '^FuzzQuantizeSpecBand$$' -fuzztime $(SPEC_FUZZ_EXECS) ./gokern/ternary
	$(GO) test -run '^$$' -fuzz '^FuzzConvShape$$' -fuzztime $(FUZZTIME) ./gokern/ops/conv2d

lint: venv
	"$(PY)" -m ruff check python tests_py tests_go setup.py examples
	"$(PY)" -m ruff format --check python tests_py tests_go setup.py examples

# The whole suite on the default family, then the parity tests again on the
# generic Go kernels alone (every SIMD family switched off).
test-py: install
	"$(PY)" -m pytest tests_py -q
	BITNET_GO_DISABLE=all "$(PY)" -m pytest -q tests_py/test_quantize.py tests_py/test_tl.py tests_py/test_conv.py

bench: install
	cd /tmp && "$(PY)" -m bitnet_go bench $(BENCH_ARGS)

# `make bench`'s command line with no suite named (every suite), on tiny inputs: a few
# seconds, so that the bench cannot break unnoticed (it once failed on Python 3.11).
BENCH_SMOKE_ARGS := --quick
bench-smoke: install
	cd /tmp && "$(PY)" -m bitnet_go bench $(BENCH_SMOKE_ARGS) > /dev/null

# The example notebooks alone (test-py runs them too, in tests_py/test_notebooks.py).
test-notebooks: install
	"$(PY)" -m pytest tests_py/test_notebooks.py -q -rs

# bitnet.cpp's I2_S kernel for `bench linear`, built out of tree from a
# microsoft/BitNet checkout (nothing of it is copied here):
#   make bitnet-cpp BITNET_SRC=~/src/BitNet
#   BITNET_CPP_PEER=$PWD/build/bitnet_cpp/libbitnet_cpp_peer.so make bench BENCH_ARGS=linear
.PHONY: bitnet-cpp
bitnet-cpp:
	@test -n "$(BITNET_SRC)" || { echo "usage: make bitnet-cpp BITNET_SRC=/path/to/microsoft/BitNet"; exit 2; }
	bash tools/bitnet_cpp/build.sh "$(BITNET_SRC)" build/bitnet_cpp

wheel: venv
	"$(PY)" -m pip wheel --no-deps --no-build-isolation -w dist .

clean:
	rm -rf build dist python/*.egg-info $(LIB) $(basename $(LIB)).h
