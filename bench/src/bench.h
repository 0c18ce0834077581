/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the benchmark programs share: their clock, and the recording event
 * that mapcost, announce and userevents open on themselves. The host's
 * <linux/perf_event.h> has none of the series' attr bits (mmap3,
 * code_regions): those are set by their number.
 */
#ifndef BENCH_H
#define BENCH_H

#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds: perf record -k 1's clock. */
static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define BENCH_ATTR_FLAGS_OFFSET 40	/* the u64 of bitfields in perf_event_attr */
#define BENCH_ATTR_BIT_MMAP3 40
#define BENCH_ATTR_BIT_CODE_REGIONS 41

/*
 * An event of this task's user space that records nothing by itself, each
 * of its records with the TID and the time: the caller chooses the type and
 * config (a dummy software event by default) and what it records.
 */
static inline void bench_attr_init(struct perf_event_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
	attr->type = PERF_TYPE_SOFTWARE;
	attr->config = PERF_COUNT_SW_DUMMY;
	attr->sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	attr->sample_id_all = 1;
	attr->exclude_kernel = 1;
	attr->exclude_hv = 1;
}

/* Sets a bit of the series' that the host's header does not name. */
static inline void bench_attr_set(struct perf_event_attr *attr, int bit)
{
	uint64_t flags;

	memcpy(&flags, (char *)attr + BENCH_ATTR_FLAGS_OFFSET, sizeof(flags));
	flags |= 1ull << bit;
	memcpy((char *)attr + BENCH_ATTR_FLAGS_OFFSET, &flags, sizeof(flags));
}

#endif
