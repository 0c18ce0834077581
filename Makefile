# mmap3: kernel + perf patch series and libperfjit.
#
#   make          build everything and run the demo in the QEMU-booted kernel
#   make check    run every test; ends with "N passed, N failed, N skipped"
#   make check-lib  libperfjit and its agents alone, host tests only: no
#                 kernel, no VM
#   make check-debug  the VM suite and the fault-injection, fuzz and load
#                 tests on a KASAN/UBSAN/KFENCE/kmemleak/lockdep kernel
#
# Kernel builds (make kernel, make kernel-debug) take build/.kbuild.lock
# (scripts/build-kernel), so two never run at once.
# See README.md and docs/ for the rest.

SHELL := /bin/bash
S := scripts

.PHONY: all build deps tree kernel kernel-debug debug-tests perf selftests libperfjit tools \
	demo check check-lib check-debug check-full series-check export bench clean distclean

all: build demo

build: deps tree kernel tools

deps:
	@$(S)/install-deps

tree: deps
	@$(S)/mktree

kernel: tree
	@$(S)/build-kernel

# The debug kernel: kernel/vm.config + kernel/debug.config, in
# build/kbuild-debug, linked as build/bzImage-debug.
kernel-debug: tree
	@KCONFIG_EXTRA=kernel/debug.config $(S)/build-kernel

# The host-built programs that make check-debug runs in the VM (build/debug/).
debug-tests: tree
	@$(MAKE) -s -C tests/debug

tools: perf selftests vmtests libperfjit

perf: tree
	@$(S)/build-tools perf

selftests: tree
	@$(S)/build-tools selftests

vmtests: tree
	@$(S)/build-tools vmtests

libperfjit: deps
	@$(S)/build-libperfjit

demo: build
	@demo/run-demo

check: build
	@tests/check

# The library's host tests (GoogleTest, the installed library from C and
# C++, clang-format, the agents' options): what needs no patched kernel.
check-lib: libperfjit
	@tests/check --only libperfjit

# The VM suite, fault injection, fuzzing and load on the debug kernel
# (long under TCG; see docs/testing.md). tests/check-debug builds tests/debug itself
# and records a program that does not build as a failure.
check-debug: build kernel-debug
	@tests/check-debug

# The whole upstream perf test suite in the VM, then check-debug (long
# under TCG; see docs/testing.md).
check-full: build kernel-debug
	@rc=0; tests/check-full || rc=1; tests/check-debug || rc=1; exit $$rc

# Benchmarks in the VM: bench/results/results.md and results.png.
bench: build
	@bench/run

series-check:
	@$(S)/check-tree-exported

export:
	@$(S)/export-series

clean:
	rm -rf build/check build/check-debug build/vm-out

distclean:
	rm -rf build
