// SPDX-License-Identifier: GPL-2.0
/*
 * fault-inject: drive the allocation- and copy-failure paths of code regions
 * and of deferred MMAP3 build-id reads with per-task fault injection, and
 * check every outcome. Runs as root in the debug kernel's VM
 * (tests/check-debug); prints PASS/FAIL/SKIP lines and "COVERAGE" lines,
 * and exits non-zero when something failed.
 *
 *	fault-inject [-v] [only]	only: code-region, usercopy, deferred
 *
 * -v prints every attempt, and has every fault dump its stack in the kernel
 * log (the capabilities' "verbose" 2).
 *
 * For N = 1, 2, ... the N-th fault-injection point that the task reaches in
 * one system call (and the work the call leaves for the task's return to
 * user space) fails: /proc/thread-self/fail-nth, armed just before the
 * call. failslab, fail_page_alloc and fail_usercopy are set up in debugfs so
 * that sleeping allocations and order-0 pages count too, and only for the
 * marked task (task-filter); their "times" counters tell how often each
 * fired. The loop ends at the first N that no fault reached: the call then
 * ran its normal path, and its outcome is checked as well.
 *
 *   code-region	prctl(PR_PERF_CODE_REGION) with a name and a build-id,
 *			while an event with mmap3 and code_regions watches the
 *			process: a failed call returns ENOMEM or EFAULT and
 *			leaves no record; a call that succeeds leaves exactly
 *			one record, well formed and as announced.
 *   usercopy		the same with only fail_usercopy counting: every fault
 *			gives EFAULT and no record.
 *   deferred		mmap() of a shared object whose build-id is known, from
 *			ext2 on a loop device, after evicting it from the page
 *			cache, so that its MMAP3 record says
 *			PERF_MMAP3_BUILD_ID_PENDING and the kernel's worker
 *			reads the build-id into a PERF_RECORD_MMAP3_BUILD_ID;
 *			then a second mapping. mmap() succeeds or fails with
 *			ENOMEM (then no record); the record exists once, with
 *			PERF_MMAP3_BUILD_ID_ERR (the read could not be
 *			allocated) or pending, and a pending one has exactly
 *			one build-id record, after the mapping's, with the
 *			right build-id or PERF_MMAP3_BUILD_ID_ERR and none,
 *			never a wrong one. The faults are the mapping task's:
 *			the worker's read is outside them.
 *
 * The shared objects are fi-lib1.so and fi-lib2.so beside this program,
 * linked with the build-ids FI_BUILD_ID1 and FI_BUILD_ID2 (tests/debug/
 * Makefile). MMAP3_CHECK_OLD_LAYOUT=1 reads kernels from before
 * fixed_size (see mmap3-check.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <linux/perf_event.h>
#include <linux/prctl.h>

#include "mmap3-check.h"

#ifndef FI_BUILD_ID1
#error "FI_BUILD_ID1 (the build-id of fi-lib1.so, hex) must be defined"
#endif
#ifndef FI_BUILD_ID2
#error "FI_BUILD_ID2 (the build-id of fi-lib2.so, hex) must be defined"
#endif

#define MAX_N		5000	/* more fault points than this in one call: FAIL */
#define RB_PAGES	16
#define NAME		"fault-inject-region"
#define DBG		"/sys/kernel/debug"

static int verbose;
static int failures;
static long page;

static void result(const char *kind, const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("%s fault-inject/%s", kind, name);
	if (fmt) {
		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	fflush(stdout);
	if (!strcmp(kind, "FAIL"))
		failures++;
}

/* ---- debugfs knobs ---------------------------------------------------- */

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n < 0 ? -errno : 0;
}

static int read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static const char *const caps[] = { "failslab", "fail_page_alloc", "fail_usercopy" };
#define NCAPS 3
#define TIMES_START 1000000000L

struct knob {
	const char *cap, *attr;
	char saved[64];
	bool have;
};

static struct knob knobs[] = {
	{ "failslab", "ignore-gfp-wait" },
	{ "failslab", "cache-filter" },
	{ "failslab", "task-filter" },
	{ "failslab", "probability" },
	{ "failslab", "verbose" },
	{ "failslab", "times" },
	{ "fail_page_alloc", "ignore-gfp-wait" },
	{ "fail_page_alloc", "ignore-gfp-highmem" },
	{ "fail_page_alloc", "min-order" },
	{ "fail_page_alloc", "task-filter" },
	{ "fail_page_alloc", "probability" },
	{ "fail_page_alloc", "verbose" },
	{ "fail_page_alloc", "times" },
	{ "fail_usercopy", "task-filter" },
	{ "fail_usercopy", "probability" },
	{ "fail_usercopy", "verbose" },
	{ "fail_usercopy", "times" },
};
#define NKNOBS (sizeof(knobs) / sizeof(knobs[0]))

static int set_knob(const char *cap, const char *attr, const char *val)
{
	char path[256];
	int ret;

	snprintf(path, sizeof(path), DBG "/%s/%s", cap, attr);
	ret = write_file(path, val);
	if (ret)
		fprintf(stderr, "fault-inject: %s = %s: %s\n", path, val, strerror(-ret));
	return ret;
}

static void save_knobs(void)
{
	char path[256];

	for (size_t i = 0; i < NKNOBS; i++) {
		snprintf(path, sizeof(path), DBG "/%s/%s", knobs[i].cap, knobs[i].attr);
		knobs[i].have = !read_file(path, knobs[i].saved, sizeof(knobs[i].saved));
	}
}

static void restore_knobs(void)
{
	for (size_t i = 0; i < NKNOBS; i++)
		if (knobs[i].have)
			set_knob(knobs[i].cap, knobs[i].attr, knobs[i].saved);
}

/*
 * Every capability counts every call it sees (sleeping allocations and
 * order-0 pages included), for this task only, with nothing failing at
 * random, without a stack dump per fault, and with a "times" budget that
 * tells how often it fired. @only: "fail_usercopy" leaves failslab and
 * fail_page_alloc out (fail_usercopy always counts); NULL: all count.
 */
static int setup_knobs(const char *only)
{
	bool slab = !only || !strcmp(only, "failslab");
	bool pages = !only || !strcmp(only, "fail_page_alloc");
	char t[32];
	int ret = 0;

	snprintf(t, sizeof(t), "%ld", TIMES_START);
	for (int i = 0; i < NCAPS; i++) {
		ret |= set_knob(caps[i], "task-filter", "Y");
		ret |= set_knob(caps[i], "probability", "0");
		/* -v: each fault also dumps its stack to the kernel log. */
		ret |= set_knob(caps[i], "verbose", verbose ? "2" : "0");
		ret |= set_knob(caps[i], "times", t);
	}
	ret |= set_knob("failslab", "ignore-gfp-wait", "N");
	/* No cache has SLAB_FAILSLAB: cache-filter Y leaves failslab out. */
	ret |= set_knob("failslab", "cache-filter", slab ? "N" : "Y");
	ret |= set_knob("fail_page_alloc", "ignore-gfp-wait", "N");
	ret |= set_knob("fail_page_alloc", "ignore-gfp-highmem", "N");
	/* No page allocation is of an order this high: leaves them out. */
	ret |= set_knob("fail_page_alloc", "min-order", pages ? "0" : "4294967295");
	/* fail_usercopy has no filter of its own: it always counts. */
	return ret;
}

struct fired {
	long n[NCAPS];
};

static void read_fired(struct fired *f)
{
	char path[256], buf[64];

	for (int i = 0; i < NCAPS; i++) {
		snprintf(path, sizeof(path), DBG "/%s/times", caps[i]);
		f->n[i] = read_file(path, buf, sizeof(buf)) ? 0 : TIMES_START - atol(buf);
	}
}

/* ---- fail-nth ----------------------------------------------------------- */

static int nth_fd = -1;
static long spurious_usercopy;	/* faults that hit our own fail-nth read/write */

static void arm(unsigned int n)
{
	char buf[16];
	int len = snprintf(buf, sizeof(buf), "%u", n);

	/* The value is copied in before it takes effect: this write is safe. */
	if (pwrite(nth_fd, buf, len, 0) != len) {
		perror("fault-inject: arming fail-nth");
		exit(2);
	}
}

/*
 * Whether the armed fault fired, and disarm. Reading and writing fail-nth
 * copy to and from user space, which counts too while it is armed: with
 * 1 left the read's copy fires (EFAULT, and it is disarmed), with 2 left
 * the disarming write's copy does. Those are not the call's and are
 * subtracted from fail_usercopy's count.
 */
static bool fired_and_disarm(void)
{
	char buf[16] = "";
	ssize_t n = pread(nth_fd, buf, sizeof(buf) - 1, 0);

	if (n < 0) {
		if (errno != EFAULT) {
			perror("fault-inject: reading fail-nth");
			exit(2);
		}
		spurious_usercopy++;	/* 1 was left: now 0 */
		return false;
	}
	buf[n] = 0;
	if (atoi(buf) == 0)
		return true;
	if (pwrite(nth_fd, "0", 1, 0) != 1) {
		if (errno != EFAULT) {
			perror("fault-inject: disarming fail-nth");
			exit(2);
		}
		spurious_usercopy++;
	}
	return false;
}

/* ---- the event and its records ------------------------------------------ */

struct rec {
	__u64 addr, len, pgoff;
	__u32 pid, tid, prot, flags;
	__u16 mmap3_flags;
	__u8 build_id_size, build_id[20];
	char filename[PATH_MAX];
	bool sample_tid_ok;
	__u32 maj, min;
	__u64 ino, ino_generation;
	int seq;			/* among MMAP3 and build-id records */
};

/* A PERF_RECORD_MMAP3_BUILD_ID. */
struct bid_rec {
	__u32 maj, min;
	__u64 ino, ino_generation;
	__u16 mmap3_flags;
	__u8 build_id_size, build_id[20];
	int seq;
};

#define MAX_RECS 64
static struct rec recs[MAX_RECS];
static struct bid_rec bids[MAX_RECS];
static int nrecs, nrecs_over, nbids, nseq;

static int collect(void *arg, const struct perf_event_header *h,
		   const struct mmap3_view *v, char *why)
{
	struct rec *r;

	(void)arg;
	(void)why;
	if (!v && h->type == MMAP3_BUILD_ID_TYPE) {
		const struct mmap3_build_id_fixed *f = (const void *)h;
		struct bid_rec *b;

		if (nbids == MAX_RECS) {
			nrecs_over++;
			return 0;
		}
		b = &bids[nbids++];
		b->maj = f->maj;
		b->min = f->min;
		b->ino = f->ino;
		b->ino_generation = f->ino_generation;
		b->mmap3_flags = f->mmap3_flags;
		b->build_id_size = f->build_id_size;
		memcpy(b->build_id, (const __u8 *)h + f->fixed_size, f->build_id_size);
		b->seq = nseq++;
		return 0;
	}
	if (!v)
		return 0;
	if (nrecs == MAX_RECS) {
		nrecs_over++;
		return 0;
	}
	r = &recs[nrecs++];
	r->addr = v->r->addr;
	r->len = v->r->len;
	r->pgoff = v->r->pgoff;
	r->pid = v->r->pid;
	r->tid = v->r->tid;
	r->prot = v->r->prot;
	r->flags = v->r->flags;
	r->mmap3_flags = v->r->mmap3_flags;
	r->maj = v->r->maj;
	r->min = v->r->min;
	r->ino = v->r->ino;
	r->ino_generation = v->r->ino_generation;
	r->seq = nseq++;
	r->build_id_size = v->r->build_id_size;
	memcpy(r->build_id, v->build_id, v->r->build_id_size);
	snprintf(r->filename, sizeof(r->filename), "%s", v->filename);
	r->sample_tid_ok = !v->sample_tid ||
		(v->sample_tid[0] == (__u32)getpid() && v->sample_tid[1] == (__u32)gettid());
	return 0;
}

struct event {
	int fd;
	void *base;
	size_t size;
	struct mmap3_check chk;
	__u64 malformed_seen;
};

static int open_event(struct event *e)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_DUMMY;
	attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	attr.sample_id_all = 1;
	attr.mmap3 = 1;
	attr.code_regions = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	e->fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (e->fd < 0)
		return -errno;
	e->size = (1 + RB_PAGES) * page;
	e->base = mmap(NULL, e->size, PROT_READ | PROT_WRITE, MAP_SHARED, e->fd, 0);
	if (e->base == MAP_FAILED) {
		int err = -errno;

		close(e->fd);
		return err;
	}
	/* Fault the buffer's pages in now, not inside a fault-injection window. */
	for (size_t off = 0; off < e->size; off += page)
		(void)*(volatile char *)((char *)e->base + off);
	mmap3_check_init(&e->chk, &attr);
	e->chk.cb = collect;
	e->malformed_seen = 0;
	return 0;
}

static void close_event(struct event *e)
{
	mmap3_check_free(&e->chk);
	munmap(e->base, e->size);
	close(e->fd);
}

/*
 * Read the records written since the last drain into recs[]. Returns a
 * reason when the buffer held something broken, else NULL.
 */
/* Read what the buffer holds, after what earlier calls read. */
static const char *drain_more(struct event *e)
{
	static char why[400];

	mmap3_check_drain(&e->chk, e->base, RB_PAGES * page);
	if (e->chk.malformed != e->malformed_seen) {
		e->malformed_seen = e->chk.malformed;
		snprintf(why, sizeof(why), "malformed record: %s", e->chk.first_reason);
		return why;
	}
	if (e->chk.lost) {
		snprintf(why, sizeof(why), "%llu records lost", (unsigned long long)e->chk.lost);
		return why;
	}
	if (nrecs_over)
		return "too many MMAP3 records";
	return NULL;
}

static const char *drain(struct event *e)
{
	nrecs = nrecs_over = nbids = nseq = 0;
	return drain_more(e);
}

static int parse_hex(const char *s, __u8 *out, int max)
{
	int n = 0;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	while (s[0] && s[1] && n < max) {
		unsigned int b;

		if (sscanf(s, "%2x", &b) != 1)
			return -1;
		out[n++] = b;
		s += 2;
	}
	return *s ? -1 : n;
}

static void hex(const __u8 *b, int n, char *out)
{
	for (int i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = 0;
}

/* ---- code regions -------------------------------------------------------- */

struct outcome {
	long attempts, enomem, efault, tolerated, ok;
	struct fired fired;
};

static const char *check_region_rec(const struct rec *r, const struct perf_code_region *cr)
{
	static char why[300];

	if (r->addr != cr->addr || r->len != cr->len || r->pgoff != cr->pgoff)
		snprintf(why, sizeof(why), "record %#llx+%#llx@%#llx, announced %#llx+%#llx@%#llx",
			 (unsigned long long)r->addr, (unsigned long long)r->len,
			 (unsigned long long)r->pgoff, (unsigned long long)cr->addr,
			 (unsigned long long)cr->len, (unsigned long long)cr->pgoff);
	else if (r->mmap3_flags != PERF_MMAP3_CODE_REGION)
		snprintf(why, sizeof(why), "mmap3_flags %#x", r->mmap3_flags);
	else if (r->pid != (__u32)getpid() || r->tid != (__u32)gettid() || !r->sample_tid_ok)
		snprintf(why, sizeof(why), "pid/tid %u/%u", r->pid, r->tid);
	else if (r->build_id_size != cr->build_id_size ||
		 memcmp(r->build_id, cr->build_id, cr->build_id_size))
		snprintf(why, sizeof(why), "build-id of %u bytes, not the one announced",
			 r->build_id_size);
	else if (strcmp(r->filename, (const char *)(uintptr_t)cr->name))
		snprintf(why, sizeof(why), "name '%.200s'", r->filename);
	else
		return NULL;
	return why;
}

static void code_region_loop(const char *name, bool usercopy_only)
{
	struct perf_code_region cr;
	struct outcome o = { 0 };
	struct fired f0, f1;
	struct event e;
	const char *why;
	void *code;
	long ret;
	int err;

	err = open_event(&e);
	if (err) {
		result("FAIL", name, "perf_event_open/mmap with mmap3 and code_regions: %s",
		       strerror(-err));
		return;
	}
	code = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED) {
		result("FAIL", name, "mmap: %s", strerror(errno));
		close_event(&e);
		return;
	}
	memset(&cr, 0, sizeof(cr));
	cr.size = sizeof(cr);
	cr.addr = (uintptr_t)code;
	cr.len = page;
	cr.pgoff = 0x1000;
	cr.name = (uintptr_t)NAME;
	cr.build_id_size = parse_hex(FI_BUILD_ID1, cr.build_id, sizeof(cr.build_id));
	why = drain(&e);
	if (why) {
		result("FAIL", name, "before the first call: %s", why);
		goto out;
	}

	if (setup_knobs(usercopy_only ? "fail_usercopy" : NULL)) {
		result("FAIL", name, "cannot set up fault injection in " DBG);
		goto out;
	}
	read_fired(&f0);
	spurious_usercopy = 0;
	for (unsigned int n = 1;; n++) {
		bool fired;

		if (n > MAX_N) {
			result("FAIL", name, "still faulting after %d attempts", MAX_N);
			goto out;
		}
		o.attempts++;
		arm(n);
		ret = prctl(PR_PERF_CODE_REGION, PR_PERF_CODE_REGION_ANNOUNCE,
			    (unsigned long)&cr, 0, 0);
		err = errno;
		fired = fired_and_disarm();

		why = drain(&e);
		if (why) {
			result("FAIL", name, "N=%u: %s", n, why);
			goto out;
		}
		if (verbose)
			fprintf(stderr, "%s N=%u: ret %ld errno %d fired %d records %d\n",
				name, n, ret, ret < 0 ? err : 0, fired, nrecs);
		if (ret < 0) {
			if (!fired) {
				result("FAIL", name, "N=%u: failed with %s, no fault fired",
				       n, strerror(err));
				goto out;
			}
			if (usercopy_only ? err != EFAULT : err != ENOMEM && err != EFAULT) {
				result("FAIL", name, "N=%u: a fault gave %s, not %s", n,
				       strerror(err), usercopy_only ? "EFAULT" : "ENOMEM or EFAULT");
				goto out;
			}
			if (nrecs) {
				result("FAIL", name, "N=%u: failed with %s but left %d record(s)",
				       n, strerror(err), nrecs);
				goto out;
			}
			if (err == ENOMEM)
				o.enomem++;
			else
				o.efault++;
			continue;
		}
		if (usercopy_only && fired) {
			result("FAIL", name, "N=%u: a user copy failed but the call returned %ld",
			       n, ret);
			goto out;
		}
		if (ret != 0 || nrecs != 1) {
			result("FAIL", name, "N=%u%s: returned %ld with %d record(s), want 0 and 1",
			       n, fired ? " (a fault fired)" : "", ret, nrecs);
			goto out;
		}
		why = check_region_rec(&recs[0], &cr);
		if (why) {
			result("FAIL", name, "N=%u%s: %s", n, fired ? " (a fault fired)" : "", why);
			goto out;
		}
		if (fired) {
			o.tolerated++;
			continue;
		}
		o.ok++;
		break;
	}
	read_fired(&f1);
	for (int i = 0; i < NCAPS; i++)
		o.fired.n[i] = f1.n[i] - f0.n[i];
	o.fired.n[2] -= spurious_usercopy;
	result("PASS", name, "%ld fault points: %ld ENOMEM, %ld EFAULT, %ld tolerated, "
	       "then one well-formed record", o.attempts - 1, o.enomem, o.efault, o.tolerated);
	printf("COVERAGE fault-inject/%s: %ld calls; fired failslab %ld, fail_page_alloc %ld, "
	       "fail_usercopy %ld; outcomes ENOMEM %ld, EFAULT %ld, success despite a fault %ld\n",
	       name, o.attempts, o.fired.n[0], o.fired.n[1], o.fired.n[2],
	       o.enomem, o.efault, o.tolerated);
out:
	restore_knobs();
	munmap(code, page);
	close_event(&e);
}

/* ---- deferred MMAP3 build-id reads --------------------------------------- */

static char mnt[128], img[128], loopdev[160], lib[2][256];
static bool mounted;

static int run(const char *fmt, ...)
{
	char cmd[4 * PATH_MAX];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (verbose)
		fprintf(stderr, "+ %s\n", cmd);
	st = system(cmd);
	return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* An ext2 image on tmpfs, on a loop device, with the two shared objects. */
static const char *setup_ext2(const char *dir)
{
	static char why[PATH_MAX + 64];

	if (run("command -v mkfs.ext2 >/dev/null"))
		return "no mkfs.ext2 (e2fsprogs)";
	snprintf(img, sizeof(img), "/tmp/fault-inject.%d.img", getpid());
	snprintf(mnt, sizeof(mnt), "/tmp/fault-inject.%d.mnt", getpid());
	if (mkdir(mnt, 0755) && errno != EEXIST)
		return "mkdir /tmp/...mnt";
	if (run("truncate -s 8M %s && mkfs.ext2 -q -F %s >/dev/null 2>&1", img, img))
		return "mkfs.ext2 failed";
	/*
	 * losetup, then mount: "mount -o loop" fails with EBUSY in the VM
	 * (util-linux 2.38 on the overlay root), the two steps do not.
	 */
	snprintf(loopdev, sizeof(loopdev), "%s.dev", img);
	if (run("losetup -f --show %s >%s", img, loopdev) ||
	    read_file(loopdev, loopdev, sizeof(loopdev)) || strncmp(loopdev, "/dev/", 5))
		return "losetup failed (CONFIG_BLK_DEV_LOOP?)";
	if (run("mount -t ext2 %s %s", loopdev, mnt)) {
		snprintf(why, sizeof(why), "mount -t ext2 %s failed (CONFIG_EXT2_FS?)", loopdev);
		return why;
	}
	mounted = true;
	for (int i = 0; i < 2; i++) {
		snprintf(lib[i], sizeof(lib[i]), "%s/fi-lib%d.so", mnt, i + 1);
		if (run("cp %s/fi-lib%d.so %s && sync", dir, i + 1, lib[i])) {
			snprintf(why, sizeof(why), "cannot copy %s/fi-lib%d.so", dir, i + 1);
			return why;
		}
	}
	return NULL;
}

static void teardown_ext2(void)
{
	char devfile[160];

	if (mounted)
		run("umount %s", mnt);
	if (!strncmp(loopdev, "/dev/", 5))
		run("losetup -d %s", loopdev);
	snprintf(devfile, sizeof(devfile), "%s.dev", img);
	unlink(devfile);
	rmdir(mnt);
	unlink(img);
}

static int drop_caches(int fd)
{
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	return write_file("/proc/sys/vm/drop_caches", "3");
}

/* The records of the last drain, on standard error (-v). */
static void dump_recs(void)
{
	char b[41];

	for (int i = 0; i < nrecs; i++) {
		hex(recs[i].build_id, recs[i].build_id_size, b);
		fprintf(stderr, "  record %d: %#llx+%#llx pgoff %#llx prot %#x flags %#x "
			"mmap3_flags %#x build-id '%s' file '%s'\n", i,
			(unsigned long long)recs[i].addr, (unsigned long long)recs[i].len,
			(unsigned long long)recs[i].pgoff, recs[i].prot, recs[i].flags,
			recs[i].mmap3_flags, b, recs[i].filename);
	}
}

static int find_rec(__u64 addr, const char *file)
{
	int i, found = -1;

	for (i = 0; i < nrecs; i++) {
		if (recs[i].addr != addr || strcmp(recs[i].filename, file))
			continue;
		if (found >= 0)
			return -2;
		found = i;
	}
	return found;
}

/* The build-id record of @r's file: its index, -1 if none, -2 if several. */
static int find_bid(const struct rec *r)
{
	int i, found = -1;

	for (i = 0; i < nbids; i++) {
		if (bids[i].maj != r->maj || bids[i].min != r->min ||
		    bids[i].ino != r->ino || bids[i].ino_generation != r->ino_generation)
			continue;
		if (found >= 0)
			return -2;
		found = i;
	}
	return found;
}

/*
 * The worker writes the build-id record of a pending mapping after the
 * mapping's own: wait up to 30 s for it to come.
 */
static const char *wait_bid(struct event *e, __u64 addr, const char *file)
{
	const char *why;
	int r;

	for (int i = 0; i < 3000; i++) {
		r = find_rec(addr, file);
		if (r < 0 || !(recs[r].mmap3_flags & PERF_MMAP3_BUILD_ID_PENDING) ||
		    find_bid(&recs[r]) != -1)
			return NULL;
		usleep(10000);
		why = drain_more(e);
		if (why)
			return why;
	}
	return NULL;
}

static void deferred_loop(const char *dir)
{
	const char *name = "deferred";
	__u8 want[2][20];
	int wsize[2], fd[2] = { -1, -1 };
	size_t len[2];
	struct outcome o = { 0 };
	struct fired f0, f1;
	long errs = 0, enomem_names = 0;
	struct event e;
	const char *why;
	int err;

	wsize[0] = parse_hex(FI_BUILD_ID1, want[0], 20);
	wsize[1] = parse_hex(FI_BUILD_ID2, want[1], 20);
	why = setup_ext2(dir);
	if (why) {
		result(mounted || strncmp(why, "no mkfs", 7) ? "FAIL" : "SKIP", name, "%s", why);
		teardown_ext2();
		return;
	}
	for (int i = 0; i < 2; i++) {
		struct stat st;

		fd[i] = open(lib[i], O_RDONLY | O_CLOEXEC);
		if (fd[i] < 0 || fstat(fd[i], &st)) {
			result("FAIL", name, "open %s: %s", lib[i], strerror(errno));
			goto out_fds;
		}
		len[i] = st.st_size;
	}
	err = open_event(&e);
	if (err) {
		result("FAIL", name, "perf_event_open/mmap with mmap3: %s", strerror(-err));
		goto out_fds;
	}
	if (setup_knobs(NULL)) {
		result("FAIL", name, "cannot set up fault injection in " DBG);
		goto out;
	}
	read_fired(&f0);
	spurious_usercopy = 0;
	for (unsigned int n = 1;; n++) {
		void *a0, *a1;
		int r0, r1, b0, err0;
		bool fired;

		if (n > MAX_N) {
			result("FAIL", name, "still faulting after %d attempts", MAX_N);
			goto out;
		}
		o.attempts++;
		if (drop_caches(fd[0])) {
			result("FAIL", name, "cannot drop the page cache");
			goto out;
		}
		/* The second file is warm: its record could go out at once. */
		if (pread(fd[1], (char[256]){ 0 }, 256, 0) < 0) {
			result("FAIL", name, "read %s: %s", lib[1], strerror(errno));
			goto out;
		}
		if ((why = drain(&e))) {
			result("FAIL", name, "N=%u, before mmap: %s", n, why);
			goto out;
		}
		arm(n);
		a0 = mmap(NULL, len[0], PROT_READ | PROT_EXEC, MAP_PRIVATE, fd[0], 0);
		err0 = errno;
		fired = fired_and_disarm();
		a1 = mmap(NULL, len[1], PROT_READ | PROT_EXEC, MAP_PRIVATE, fd[1], 0);
		if (a1 == MAP_FAILED) {
			result("FAIL", name, "N=%u: mmap of the second file: %s", n,
			       strerror(errno));
			goto out;
		}
		why = drain(&e);
		if (!why && a0 != MAP_FAILED)
			why = wait_bid(&e, (uintptr_t)a0, lib[0]);
		if (a0 != MAP_FAILED)
			munmap(a0, len[0]);
		munmap(a1, len[1]);
		if (why) {
			result("FAIL", name, "N=%u: %s", n, why);
			goto out;
		}
		if (verbose) {
			fprintf(stderr, "deferred N=%u: mmap %s at %p, then %p; fired %d, "
				"records %d\n", n, a0 == MAP_FAILED ? strerror(err0) : "ok",
				a0, a1, fired, nrecs);
			dump_recs();
		}

		r1 = find_rec((uintptr_t)a1, lib[1]);
		if (r1 < 0) {
			result("FAIL", name, "N=%u: %s record(s) for the second mapping", n,
			       r1 == -1 ? "no" : "several");
			goto out;
		}
		if (recs[r1].build_id_size != wsize[1] ||
		    memcmp(recs[r1].build_id, want[1], wsize[1])) {
			result("FAIL", name, "N=%u: the second mapping (no fault) has build-id "
			       "size %u flags %#x", n, recs[r1].build_id_size, recs[r1].mmap3_flags);
			goto out;
		}
		if (a0 == MAP_FAILED) {
			if (err0 != ENOMEM || !fired) {
				result("FAIL", name, "N=%u: mmap failed with %s%s", n, strerror(err0),
				       fired ? "" : " and no fault fired");
				goto out;
			}
			if (nrecs != 1) {
				result("FAIL", name, "N=%u: mmap failed but left a record", n);
				goto out;
			}
			o.enomem++;
			continue;
		}
		r0 = find_rec((uintptr_t)a0, lib[0]);
		/*
		 * perf_event_mmap() names a mapping "//enomem" when it cannot
		 * allocate the buffer for the path, as MMAP and MMAP2 do.
		 */
		if (r0 == -1 && fired) {
			r0 = find_rec((uintptr_t)a0, "//enomem");
			if (r0 >= 0)
				enomem_names++;
		}
		if (r0 < 0) {
			result("FAIL", name, "N=%u%s: %s record(s) for the mapping", n,
			       fired ? " (a fault fired)" : "", r0 == -1 ? "no" : "several");
			goto out;
		}
		if (r0 > r1) {
			result("FAIL", name, "N=%u%s: the record of the first mapping comes "
			       "after the second's", n, fired ? " (a fault fired)" : "");
			goto out;
		}
		if (recs[r0].len != ((len[0] + page - 1) & ~(page - 1)) || recs[r0].pgoff ||
		    (recs[r0].mmap3_flags & ~(PERF_MMAP3_BUILD_ID_ERR | PERF_MMAP3_BUILD_ID_PENDING)) ||
		    recs[r0].prot != (PROT_READ | PROT_EXEC)) {
			result("FAIL", name, "N=%u: record len %llu pgoff %llu flags %#x prot %#x",
			       n, (unsigned long long)recs[r0].len,
			       (unsigned long long)recs[r0].pgoff, recs[r0].mmap3_flags,
			       recs[r0].prot);
			goto out;
		}
		b0 = find_bid(&recs[r0]);
		if (!recs[r0].mmap3_flags) {
			/* The note stayed in the page cache. */
			if (recs[r0].build_id_size != wsize[0] ||
			    memcmp(recs[r0].build_id, want[0], wsize[0]) || b0 != -1) {
				result("FAIL", name, "N=%u: a record with neither ERR nor PENDING "
				       "has build-id size %u, build-id records %d", n,
				       recs[r0].build_id_size, b0);
				goto out;
			}
		} else if (recs[r0].mmap3_flags & PERF_MMAP3_BUILD_ID_ERR) {
			/* Not read at all: the read could not be allocated. */
			if (!fired || b0 != -1) {
				result("FAIL", name, "N=%u: BUILD_ID_ERR %s", n,
				       fired ? "and a build-id record" : "without a fault");
				goto out;
			}
			errs++;
		} else if (b0 < 0) {
			result("FAIL", name, "N=%u%s: %s build-id record(s) for a pending mapping",
			       n, fired ? " (a fault fired)" : "", b0 == -1 ? "no" : "several");
			goto out;
		} else if (bids[b0].seq < recs[r0].seq) {
			result("FAIL", name, "N=%u: the build-id record comes before the "
			       "mapping's record", n);
			goto out;
		} else if (bids[b0].mmap3_flags & PERF_MMAP3_BUILD_ID_ERR) {
			if (bids[b0].build_id_size || !fired) {
				result("FAIL", name, "N=%u: build-id record with ERR, size %u, %s",
				       n, bids[b0].build_id_size, fired ? "a fault" : "no fault");
				goto out;
			}
			errs++;
		} else if (bids[b0].build_id_size != wsize[0] ||
			   memcmp(bids[b0].build_id, want[0], wsize[0])) {
			char got[41], exp[41];

			hex(bids[b0].build_id, bids[b0].build_id_size, got);
			hex(want[0], wsize[0], exp);
			result("FAIL", name, "N=%u%s: WRONG build-id '%s', the file's is %s", n,
			       fired ? " (a fault fired)" : "", got, exp);
			goto out;
		}
		if (fired) {
			o.tolerated++;
			continue;
		}
		o.ok++;
		break;
	}
	read_fired(&f1);
	for (int i = 0; i < NCAPS; i++)
		o.fired.n[i] = f1.n[i] - f0.n[i];
	o.fired.n[2] -= spurious_usercopy;
	result("PASS", name, "%ld fault points: mmap ENOMEM %ld, BUILD_ID_ERR %ld, "
	       "right build-id despite a fault %ld (%ld of them named //enomem), never a "
	       "wrong one, in mapping order", o.attempts - 1, o.enomem, errs,
	       o.tolerated - errs, enomem_names);
	printf("COVERAGE fault-inject/deferred: %ld mmaps; fired failslab %ld, "
	       "fail_page_alloc %ld, fail_usercopy %ld; deferred path ERR fallback driven "
	       "%ld times, mmap ENOMEM %ld, path name //enomem %ld\n", o.attempts,
	       o.fired.n[0], o.fired.n[1], o.fired.n[2], errs, o.enomem, enomem_names);
out:
	restore_knobs();
	close_event(&e);
out_fds:
	for (int i = 0; i < 2; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	teardown_ext2();
}

int main(int argc, char **argv)
{
	char dir[PATH_MAX], *slash;
	const char *only = NULL;
	ssize_t n;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-v"))
			verbose = 1;
		else
			only = argv[i];
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	page = sysconf(_SC_PAGESIZE);

	n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	if (n < 0) {
		perror("readlink /proc/self/exe");
		return 2;
	}
	dir[n] = 0;
	slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;

	if (geteuid()) {
		result("SKIP", "all", "needs root");
		return 0;
	}
	nth_fd = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
	if (nth_fd < 0) {
		result("SKIP", "all", "no /proc/thread-self/fail-nth (CONFIG_FAULT_INJECTION)");
		return 0;
	}
	if (access(DBG "/failslab/times", W_OK) || access(DBG "/fail_page_alloc/times", W_OK) ||
	    access(DBG "/fail_usercopy/times", W_OK)) {
		result("FAIL", "all", "no " DBG "/{failslab,fail_page_alloc,fail_usercopy} "
		       "(CONFIG_FAULT_INJECTION_DEBUG_FS, FAILSLAB, FAIL_PAGE_ALLOC, "
		       "FAULT_INJECTION_USERCOPY; debugfs mounted?)");
		return 1;
	}
	save_knobs();
	/* No page faults of our own inside a fault-injection window. */
	if (mlockall(MCL_CURRENT))
		perror("fault-inject: mlockall (going on)");

	if (!only || !strcmp(only, "code-region"))
		code_region_loop("code-region", false);
	if (!only || !strcmp(only, "usercopy"))
		code_region_loop("code-region-usercopy", true);
	if (!only || !strcmp(only, "deferred"))
		deferred_loop(dir);

	restore_knobs();
	return failures ? 1 : 0;
}
