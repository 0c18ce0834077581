// SPDX-License-Identifier: GPL-2.0
/*
 * ctxsw: the cost of a context switch, for make bench's comparison of
 * perf record -a with and without code regions.
 *
 *   ctxsw --round-trips N [--register]
 *
 * Two processes on CPU 0 pass a byte back and forth over two pipes N
 * times: each round trip is two context switches on that CPU, each of
 * which goes through __perf_event_task_sched_in() while a CPU-wide event
 * exists. With --register both processes register an eventfd for code-region
 * rundowns first (prctl PR_PERF_CODE_REGION_REGISTER), as a runtime on
 * libperfjit does: the sched-in check then also looks at their
 * registration. Prints "ns_per_switch <ns>" and "signalled <n>" (how many
 * rundown requests reached the two registrations).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* As in include/uapi/linux/prctl.h of the series. */
#define PR_PERF_CODE_REGION		82
#define PR_PERF_CODE_REGION_REGISTER	2

static int usage(void)
{
	fprintf(stderr, "usage: ctxsw --round-trips N [--register]\n");
	return 2;
}

static int on_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* An eventfd registered for rundowns, or -1 with a message. */
static int register_rundowns(void)
{
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	if (efd < 0) {
		perror("ctxsw: eventfd");
		return -1;
	}
	if (prctl(PR_PERF_CODE_REGION, PR_PERF_CODE_REGION_REGISTER, efd, 0, 0)) {
		fprintf(stderr, "ctxsw: PR_PERF_CODE_REGION_REGISTER: %s\n", strerror(errno));
		close(efd);
		return -1;
	}
	return efd;
}

static uint64_t drain(int efd)
{
	uint64_t n = 0;

	if (efd < 0 || read(efd, &n, sizeof(n)) != sizeof(n))
		return 0;
	return n;
}

int main(int argc, char **argv)
{
	int ping[2], pong[2], status, efd = -1, i;
	unsigned long n = 0, k;
	bool reg = false;
	uint64_t child_signals = 0;
	int64_t start, end;
	char c = 0;
	pid_t child;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--register"))
			reg = true;
		else if (!strcmp(argv[i], "--round-trips") && i + 1 < argc)
			n = strtoul(argv[++i], NULL, 0);
		else
			return usage();
	}
	if (!n)
		return usage();
	if (pipe(ping) || pipe(pong)) {
		perror("ctxsw: pipe");
		return 1;
	}
	if (on_cpu0()) {
		perror("ctxsw: sched_setaffinity");
		return 1;
	}

	child = fork();
	if (child < 0) {
		perror("ctxsw: fork");
		return 1;
	}
	if (child == 0) {
		if (reg) {
			efd = register_rundowns();
			if (efd < 0)
				_exit(1);
		}
		/* Ready, then echo every byte; tell the parent the count at the end. */
		if (write(pong[1], &c, 1) != 1)
			_exit(1);
		for (k = 0; k < n; k++) {
			if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1)
				_exit(1);
		}
		child_signals = drain(efd);
		_exit(write(pong[1], &child_signals, sizeof(child_signals)) ==
				      sizeof(child_signals)
			      ? 0
			      : 1);
	}
	if (reg) {
		efd = register_rundowns();
		if (efd < 0) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			return 1;
		}
	}
	if (read(pong[0], &c, 1) != 1) {
		fprintf(stderr, "ctxsw: the child did not start\n");
		return 1;
	}
	start = bench_now_ns();
	for (k = 0; k < n; k++) {
		if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) {
			fprintf(stderr, "ctxsw: the child stopped\n");
			return 1;
		}
	}
	end = bench_now_ns();
	if (read(pong[0], &child_signals, sizeof(child_signals)) != sizeof(child_signals) ||
	    waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "ctxsw: the child failed\n");
		return 1;
	}
	printf("ns_per_switch %.1f\n", (double)(end - start) / (2.0 * n));
	printf("signalled %llu\n", (unsigned long long)(drain(efd) + child_signals));
	return 0;
}
