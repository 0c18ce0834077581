# mmap3: kernel + perf patch series and libperfjit.
#
#   make          build everything and run the demo in the QEMU-booted kernel
#   make check    run every test; ends with "N passed, N failed, N skipped"
#
# See README.md for the rest.

SHELL := /bin/bash
S := scripts

.PHONY: all build deps tree kernel perf selftests libperfjit tools demo check check-full \
	series-check export bench clean distclean

all: build demo

build: deps tree kernel tools

deps:
	@$(S)/install-deps

tree: deps
	@$(S)/mktree

kernel: tree
	@$(S)/build-kernel

tools: perf selftests libperfjit

perf: tree
	@$(S)/build-tools perf

selftests: tree
	@$(S)/build-tools selftests

libperfjit: deps
	@$(S)/build-libperfjit

demo: build
	@demo/run-demo

check: build
	@tests/check

# The whole upstream perf test suite in the VM (long under TCG; see README).
check-full: build
	@tests/check-full

# Benchmarks in the VM: bench/results/results.md and results.png.
bench: build
	@bench/run

series-check:
	@$(S)/series-check

export:
	@$(S)/export-series

clean:
	rm -rf build/check build/vm-out

distclean:
	rm -rf build
