// SPDX-License-Identifier: GPL-2.0
/*
 * userevents: what announcing one JIT code region costs a runtime, and what
 * the record weighs in a perf buffer, through user_events (the upstream way
 * for user space to write kernel-timestamped records into perf buffers)
 * against prctl(PR_PERF_CODE_REGION).
 *
 *   userevents [--regions N] [--rounds R] [--out CSV]
 *
 * The same N regions of 16 bytes in one executable mapping, each with a
 * 20-byte build-id and a name "bench_fn_<i>", announced one at a time:
 *   prctl-idle   prctl ANNOUNCE while no event takes code regions
 *   prctl-rec    prctl ANNOUNCE while a dummy event with code_regions on
 *                this process takes them (its ring buffer drained between
 *                batches of 500)
 *   ue-idle      writev() of a registered user_event that no tracer enabled
 *                (a runtime would test the enable bit and write nothing;
 *                this is the call when it does not, which the kernel
 *                refuses with EBADF)
 *   ue-rec       writev() of that user_event while a perf event on its
 *                tracepoint (PERF_SAMPLE_RAW | TID | TIME, period 1) on
 *                this process takes it
 *   uprobe-rec   a call of __jit_debug_register_code(), the GDB JIT
 *                interface's hook, while a perf event on a uprobe placed on
 *                it (tracefs uprobe_events) on this process takes each hit:
 *                the trap alone, before any copy of the in-memory ELF
 *                object that the interface hands over
 * The user_event carries what a JIT would have to encode for perf to place
 * the code: "u64 addr; u64 len; u64 pgoff; u32 flags; __rel_loc char[]
 * name; char[20] build_id; u8 build_id_size".
 *
 * CSV: round,mode,regions,ns_per_region,records,bytes_per_record
 * Modes this kernel lacks (no prctl, no CONFIG_USER_EVENTS, not root) are
 * reported on stderr and skipped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* Of the patched kernel, not in the host's headers. */
#define PR_PERF_CODE_REGION		82
#define PR_PERF_CODE_REGION_ANNOUNCE	1
#define REC_MMAP3			23

struct code_region {
	uint32_t size;
	uint32_t flags;
	uint64_t addr;
	uint64_t len;
	uint64_t pgoff;
	uint64_t name;
	uint8_t build_id_size;
	uint8_t reserved[3];
	uint8_t build_id[20];
};

/* <linux/user_events.h> of 6.4 and later. */
struct user_reg {
	uint32_t size;
	uint8_t enable_bit;
	uint8_t enable_size;
	uint16_t flags;
	uint64_t enable_addr;
	uint64_t name_args;
	uint32_t write_index;
} __attribute__((packed));
#define DIAG_IOCSREG _IOWR('*', 0, struct user_reg *)

#define TRACEFS "/sys/kernel/tracing"
#define UE_NAME "jit_code_region"
#define UE_FORMAT UE_NAME " u64 addr; u64 len; u64 pgoff; u32 flags; " \
		  "__rel_loc char[] name; char[20] build_id; u8 build_id_size"
#define FN_SIZE 16
#define BATCH 500
#define RB_PAGES 256

enum mode { PRCTL_IDLE, PRCTL_REC, UE_IDLE, UE_REC, UPROBE_REC, NR_MODES };
static const char *const mode_names[NR_MODES] = { "prctl-idle", "prctl-rec", "ue-idle",
						  "ue-rec", "uprobe-rec" };

struct rb {
	int fd;
	unsigned char *base;
	size_t page, size;
	uint64_t records, bytes, lost;
	uint32_t type;		/* the record type counted */
};

static int rb_open(struct rb *rb, struct perf_event_attr *attr, uint32_t type)
{
	void *p;

	memset(rb, 0, sizeof(*rb));
	rb->type = type;
	rb->fd = (int)syscall(SYS_perf_event_open, attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (rb->fd < 0)
		return -errno;
	rb->page = (size_t)sysconf(_SC_PAGESIZE);
	rb->size = RB_PAGES * rb->page;
	p = mmap(NULL, rb->size + rb->page, PROT_READ | PROT_WRITE, MAP_SHARED, rb->fd, 0);
	if (p == MAP_FAILED) {
		int err = -errno;

		close(rb->fd);
		rb->fd = -1;
		return err;
	}
	rb->base = p;
	return 0;
}

static void rb_drain(struct rb *rb)
{
	struct perf_event_mmap_page *pg;
	const unsigned char *data;
	uint64_t head, tail;

	if (rb->fd < 0)
		return;
	pg = (struct perf_event_mmap_page *)rb->base;
	data = rb->base + rb->page;
	head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	tail = pg->data_tail;
	while (tail < head) {
		struct perf_event_header h;
		size_t off = tail % rb->size, i;

		for (i = 0; i < sizeof(h); i++)
			((unsigned char *)&h)[i] = data[(off + i) % rb->size];
		if (h.size < sizeof(h))
			break;
		if (h.type == rb->type) {
			rb->records++;
			rb->bytes += h.size;
		} else if (h.type == PERF_RECORD_LOST) {
			uint64_t n = 0;

			for (i = 0; i < sizeof(n); i++)
				((unsigned char *)&n)[i] = data[(off + 16 + i) % rb->size];
			rb->lost += n;
		}
		tail += h.size;
	}
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
}

static void rb_close(struct rb *rb)
{
	if (rb->base)
		munmap(rb->base, rb->size + rb->page);
	if (rb->fd >= 0)
		close(rb->fd);
	rb->base = NULL;
	rb->fd = -1;
}


/* The registered user_event: its write index and its tracepoint id. */
static int ue_fd = -1;
static uint32_t ue_index;
static int ue_enabled;	/* bit 0 set by the kernel while a tracer has it on */
static long ue_id = -1;

static int ue_register(void)
{
	struct user_reg reg;
	char buf[32];
	FILE *f;

	ue_fd = open(TRACEFS "/user_events_data", O_RDWR | O_CLOEXEC);
	if (ue_fd < 0)
		return -errno;
	memset(&reg, 0, sizeof(reg));
	reg.size = sizeof(reg);
	reg.enable_bit = 0;
	reg.enable_size = sizeof(ue_enabled);
	reg.enable_addr = (uint64_t)(uintptr_t)&ue_enabled;
	reg.name_args = (uint64_t)(uintptr_t)UE_FORMAT;
	if (ioctl(ue_fd, DIAG_IOCSREG, &reg) < 0)
		return -errno;
	ue_index = reg.write_index;
	f = fopen(TRACEFS "/events/user_events/" UE_NAME "/id", "r");
	if (!f)
		return -errno;
	if (fgets(buf, sizeof(buf), f))
		ue_id = strtol(buf, NULL, 10);
	fclose(f);
	return ue_id < 0 ? -EINVAL : 0;
}

/* One region through the user_event: the payload a JIT would write. */
static int ue_write(uint64_t addr, uint64_t len, const char *name, const uint8_t *bid)
{
	struct __attribute__((packed)) {
		uint64_t addr, len, pgoff;
		uint32_t flags;
		uint32_t name_loc;	/* __rel_loc: size << 16 | offset from its end */
		uint8_t build_id[20];
		uint8_t build_id_size;
	} p;
	size_t name_size = strlen(name) + 1;
	struct iovec io[3] = {
		{ &ue_index, sizeof(ue_index) },
		{ &p, sizeof(p) },
		{ (void *)name, name_size },
	};

	p.addr = addr;
	p.len = len;
	p.pgoff = 0;
	p.flags = 0;
	p.name_loc = (uint32_t)(name_size << 16) | (uint32_t)(sizeof(p.build_id) + 1);
	memcpy(p.build_id, bid, 20);
	p.build_id_size = 20;
	return writev(ue_fd, io, 3) < 0 ? -errno : 0;
}

/* The GDB JIT interface's hook: a runtime calls it after each registration. */
void __attribute__((noinline)) __jit_debug_register_code(void);
void __attribute__((noinline)) __jit_debug_register_code(void)
{
	__asm__ volatile("" ::: "memory");
}

static long up_id = -1;

/* A uprobe on __jit_debug_register_code in this program, through tracefs. */
static int uprobe_place(void)
{
	uintptr_t fn = (uintptr_t)&__jit_debug_register_code;
	unsigned long start, end, pgoff;
	char line[4096], path[4096], def[8300];
	FILE *maps, *f;
	int fd, found = 0;

	maps = fopen("/proc/self/maps", "r");
	if (!maps)
		return -errno;
	while (fgets(line, sizeof(line), maps)) {
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %4095s", &start, &end, &pgoff,
			   path) == 4 && fn >= start && fn < end) {
			found = 1;
			break;
		}
	}
	fclose(maps);
	if (!found)
		return -ENOENT;
	snprintf(def, sizeof(def), "p:jitbench/register %s:%#lx\n", path,
		 (unsigned long)(fn - start + pgoff));
	fd = open(TRACEFS "/uprobe_events", O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, def, strlen(def)) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	close(fd);
	f = fopen(TRACEFS "/events/jitbench/register/id", "r");
	if (!f)
		return -errno;
	if (fgets(line, sizeof(line), f))
		up_id = strtol(line, NULL, 10);
	fclose(f);
	return up_id < 0 ? -EINVAL : 0;
}

static void uprobe_remove(void)
{
	int fd = open(TRACEFS "/uprobe_events", O_WRONLY | O_APPEND | O_CLOEXEC);

	if (fd >= 0) {
		if (write(fd, "-:jitbench/register\n", 20) < 0)
			perror("userevents: removing the uprobe");
		close(fd);
	}
}

static int cr_write(uint64_t addr, uint64_t len, const char *name, const uint8_t *bid)
{
	struct code_region r;

	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.addr = addr;
	r.len = len;
	r.name = (uint64_t)(uintptr_t)name;
	r.build_id_size = 20;
	memcpy(r.build_id, bid, 20);
	return prctl(PR_PERF_CODE_REGION, PR_PERF_CODE_REGION_ANNOUNCE, &r, 0, 0) ? -errno : 0;
}

struct result {
	double ns;
	uint64_t records, bytes;
	int ok;
};

static struct result run(enum mode mode, unsigned char *code, size_t n, char (*names)[32])
{
	struct result res = { 0 };
	struct perf_event_attr attr;
	struct rb rb = { .fd = -1 };
	uint8_t bid[20];
	uint64_t total = 0;
	size_t done, i;
	int err = 0;

	for (i = 0; i < sizeof(bid); i++)
		bid[i] = (uint8_t)(0x10 + i);
	bench_attr_init(&attr);
	if (mode == PRCTL_REC) {
		bench_attr_set(&attr, BENCH_ATTR_BIT_CODE_REGIONS);
		err = rb_open(&rb, &attr, REC_MMAP3);
	} else if (mode == UE_REC || mode == UPROBE_REC) {
		attr.type = PERF_TYPE_TRACEPOINT;
		attr.config = (uint64_t)(mode == UE_REC ? ue_id : up_id);
		/* A user_event fires in the kernel, in the write(). */
		attr.exclude_kernel = mode != UE_REC;
		attr.sample_period = 1;
		attr.sample_type |= PERF_SAMPLE_RAW;
		err = rb_open(&rb, &attr, PERF_RECORD_SAMPLE);
	}
	if (err) {
		fprintf(stderr, "userevents: %s: perf_event_open: %s\n", mode_names[mode],
			strerror(-err));
		return res;
	}
	if (mode == UE_REC && !(ue_enabled & 1)) {
		fprintf(stderr, "userevents: ue-rec: the user_event is not enabled\n");
		rb_close(&rb);
		return res;
	}
	for (done = 0; done < n; done += BATCH) {
		size_t k = n - done < BATCH ? n - done : BATCH;
		uint64_t t0 = bench_now_ns();

		for (i = done; i < done + k && !err; i++) {
			uint64_t addr = (uint64_t)(uintptr_t)(code + i * FN_SIZE);

			if (mode == UE_IDLE || mode == UE_REC)
				err = ue_write(addr, FN_SIZE, names[i], bid);
			/* A write to a user_event nobody enabled is refused. */
			if (mode == UE_IDLE && err == -EBADF)
				err = 0;
			else if (mode == UPROBE_REC)
				__jit_debug_register_code();
			else
				err = cr_write(addr, FN_SIZE, names[i], bid);
		}
		total += bench_now_ns() - t0;
		rb_drain(&rb);
		if (err)
			break;
	}
	if (err) {
		fprintf(stderr, "userevents: %s: %s\n", mode_names[mode], strerror(-err));
		rb_close(&rb);
		return res;
	}
	res.ns = (double)total / (double)n;
	res.records = rb.records;
	res.bytes = rb.records ? rb.bytes / rb.records : 0;
	res.ok = rb.lost == 0;
	if (rb.lost)
		fprintf(stderr, "userevents: %s: %llu records lost\n", mode_names[mode],
			(unsigned long long)rb.lost);
	rb_close(&rb);
	return res;
}

int main(int argc, char **argv)
{
	size_t n = 10000, i;
	int rounds = 3, r, m, have[NR_MODES];
	const char *out = NULL;
	char (*names)[32];
	unsigned char *code;
	FILE *csv = stdout;

	for (i = 1; i < (size_t)argc; i++) {
		if (!strcmp(argv[i], "--regions") && i + 1 < (size_t)argc)
			n = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < (size_t)argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--out") && i + 1 < (size_t)argc)
			out = argv[++i];
		else {
			fprintf(stderr, "usage: userevents [--regions N] [--rounds R] [--out CSV]\n");
			return 2;
		}
	}
	if (!n || rounds < 1) {
		fprintf(stderr, "userevents: --regions and --rounds must be positive\n");
		return 2;
	}
	code = mmap(NULL, n * FN_SIZE, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	names = calloc(n, sizeof(*names));
	if (code == MAP_FAILED || !names) {
		perror("userevents: memory");
		return 1;
	}
	for (i = 0; i < n; i++)
		snprintf(names[i], sizeof(names[i]), "bench_fn_%zu", i);

	have[PRCTL_IDLE] = have[PRCTL_REC] = !cr_write((uint64_t)(uintptr_t)code, FN_SIZE,
						       "probe", (const uint8_t *)names[0]);
	if (!have[PRCTL_IDLE])
		fprintf(stderr, "userevents: no prctl(PR_PERF_CODE_REGION) here: %s\n",
			strerror(errno));
	r = ue_register();
	have[UE_IDLE] = have[UE_REC] = !r;
	if (r)
		fprintf(stderr, "userevents: no user_events here (CONFIG_USER_EVENTS, root?): %s\n",
			strerror(-r));
	r = uprobe_place();
	have[UPROBE_REC] = !r;
	if (r)
		fprintf(stderr, "userevents: no uprobe here (CONFIG_UPROBE_EVENTS, root?): %s\n",
			strerror(-r));
	if (out) {
		csv = fopen(out, "w");
		if (!csv) {
			perror(out);
			return 1;
		}
	}
	fprintf(csv, "round,mode,regions,ns_per_region,records,bytes_per_record\n");
	for (r = 0; r < rounds; r++) {
		for (m = 0; m < NR_MODES; m++) {
			struct result res;

			if (!have[m])
				continue;
			res = run((enum mode)m, code, n, names);
			if (!res.ns)
				continue;
			fprintf(csv, "%d,%s,%zu,%.1f,%llu,%llu\n", r, mode_names[m], n, res.ns,
				(unsigned long long)res.records, (unsigned long long)res.bytes);
			fflush(csv);
		}
	}
	if (csv != stdout)
		fclose(csv);
	if (have[UPROBE_REC])
		uprobe_remove();
	return 0;
}
