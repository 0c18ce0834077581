// SPDX-License-Identifier: GPL-2.0
/*
 * fuzz: a bounded, seeded fuzzer of the PERF_RECORD_MMAP3 and code-region
 * interfaces, for the debug-kernel run.
 *
 *   fuzz [--seed S] [--iterations N] [--verbose]
 *
 * Each iteration is one of
 *  (a) perf_event_open() with a random perf_event_attr (software DUMMY,
 *      CPU_CLOCK or TASK_CLOCK; a random mix of the side-band, sample and
 *      exclude bits, valid and invalid sizes, pid self/child/-1/none, cpu
 *      -1/0/1/out of range), a ring buffer of a random (valid or invalid)
 *      size, ioctls and read() on the recorders; up to 8 stay open;
 *  (b) a code-region call, prctl(PR_PERF_CODE_REGION) with random fields,
 *      PERF_EVENT_IOC_CODE_REGION_RUNDOWN on a recorder or another fd, or
 *      PR_PERF_CODE_REGION_REGISTER with an eventfd, -1 or a wrong fd;
 *  (c) mmap/mprotect/munmap of ELF files (from the root file system, a
 *      copy on /tmp and, as root with mkfs.ext2 and a loop device, copies on
 *      an ext2 image that are dropped from the page cache, so that build-ids
 *      are read on the way back to user space) and of anonymous memory, a
 *      child that maps and exits, fork+exec of /bin/true, threads that map
 *      and announce.
 * The result of every call is computed beforehand from the documented
 * rules (Documentation/userspace-api/perf_mmap3.rst and perf_event_open(2));
 * a call that succeeds where an error is due, or fails with another errno,
 * is a FAIL. A perf_event_open() that fails where success was predicted is
 * tolerated only with an errno of the allowed set (EINVAL E2BIG EACCES EPERM
 * ENOENT EOPNOTSUPP EMFILE ENODEV ESRCH), counted and printed, and never for
 * a plain attr (DUMMY, full size, this process). A valid announcement
 * returns 0, whoever records.
 *
 * Every recorder's ring buffer is drained through mmap3-check.h every 64
 * iterations, before it is closed and at the end: a malformed record is a
 * FAIL. /proc/sys/kernel/tainted must not change.
 *
 * The run is reproducible from the seed: a FAIL prints the iteration, what
 * it did and the command that replays it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "mmap3-check.h"

#include <linux/prctl.h>

#ifndef PR_PERF_CODE_REGION
#error "needs the uapi prctl.h of the patched tree"
#endif

#define CR_ANNOUNCE		PR_PERF_CODE_REGION_ANNOUNCE
#define CR_REGISTER		PR_PERF_CODE_REGION_REGISTER
#define CR_UNLOAD		1u
#define CR_RUNDOWN		2u
#define CR_SIZE_VER0		64
#define CR_NAME_MAX		4096
#define KERNEL_ADDR		0xffffffff81000000ULL

#define MAX_REC			8
#define MAX_CHURN		12

static unsigned long pg;		/* page size */
static unsigned long long seed = 1;
static unsigned long iterations = 20000, iter;
static int verbose;
static int ncpu;

/* ---- randomness ---- */

static uint64_t rng;

static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rn(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static bool chance(unsigned int pct)
{
	return rn(100) < pct;
}

/* ---- what the iteration did, for the FAIL message ---- */

static char desc[2048];
static size_t desc_len;
static char history[8][2048];

__attribute__((format(printf, 1, 2)))
static void say(const char *fmt, ...)
{
	va_list ap;

	if (desc_len >= sizeof(desc) - 1)
		return;
	va_start(ap, fmt);
	desc_len += vsnprintf(desc + desc_len, sizeof(desc) - desc_len, fmt, ap);
	va_end(ap);
	if (desc_len > sizeof(desc) - 1)
		desc_len = sizeof(desc) - 1;
}

__attribute__((format(printf, 1, 2), noreturn))
static void fail(const char *fmt, ...)
{
	char msg[1024];
	unsigned long j;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fflush(stdout);
	for (j = iter > 8 ? iter - 8 : 0; j < iter; j++)
		fprintf(stderr, "  before: %s\n", history[j % 8]);
	fprintf(stderr, "  this:   %s\n", desc);
	fprintf(stderr, "  replay: fuzz --seed %llu --iterations %lu --verbose\n",
		seed, iter + 1);
	printf("FAIL debug/fuzz: seed %llu iteration %lu: %s\n", seed, iter, msg);
	fflush(stdout);
	exit(1);
}

/* ---- expected errors ---- */

struct errs {
	unsigned char e[160];
	bool any;
};

static void want(struct errs *w, int err)
{
	w->e[err] = 1;
	w->any = true;
}

static const char *errs_str(const struct errs *w)
{
	static char s[256];
	size_t n = 0;
	int i;

	s[0] = 0;
	for (i = 1; i < 160; i++)
		if (w->e[i])
			n += snprintf(s + n, sizeof(s) - n, "%s%s", n ? "|" : "",
				      strerrorname_np(i));
	return n ? s : "success";
}

static const char *errname(int e)
{
	const char *s = strerrorname_np(e);

	return s ? s : "?";
}

/*
 * Check @ret/@err against @w. Success is ret >= 0 and, when @max >= 0,
 * ret <= max.
 */
static void expect(const char *what, long ret, int err, const struct errs *w, long max)
{
	say(" -> %ld%s%s", ret, ret < 0 ? " " : "", ret < 0 ? errname(err) : "");
	if (!w->any) {
		if (ret < 0)
			fail("%s failed with %s, expected success", what, errname(err));
		if (max >= 0 && ret > max)
			fail("%s returned %ld, more than the %ld events that could take it",
			     what, ret, max);
		return;
	}
	if (ret >= 0)
		fail("%s returned %ld, expected %s", what, ret, errs_str(w));
	if (err <= 0 || err >= 160 || !w->e[err])
		fail("%s failed with %s, expected %s", what, errname(err), errs_str(w));
}

/* ---- memory fixtures ---- */

/*
 * [0, n) with @prot, then one unmapped page, then a PROT_NONE page, so that
 * the hole stays a one-page hole (every other mapping of this program is
 * larger). Returns the start.
 */
static unsigned char *guarded(size_t n, int prot)
{
	unsigned char *p = mmap(NULL, (n + 2) * pg, PROT_NONE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	if (mprotect(p, n * pg, PROT_READ | PROT_WRITE) ||
	    munmap(p + n * pg, pg)) {
		perror("mprotect/munmap");
		exit(2);
	}
	memset(p, 0xc3, n * pg);	/* ret */
	if (prot != (PROT_READ | PROT_WRITE) && mprotect(p, n * pg, prot)) {
		perror("mprotect");
		exit(2);
	}
	return p;
}

static bool page_mapped(const void *p)
{
	unsigned char v;

	return !mincore((void *)((uintptr_t)p & ~(pg - 1)), pg, &v);
}

static unsigned char *fx_rx;		/* 4 pages RX, hole after */
static unsigned char *fx_two;		/* RX page, RWX page: two exec VMAs */
static unsigned char *fx_rxrw;		/* RX page, RW page */
static unsigned char *fx_none;		/* PROT_NONE page */
static unsigned char *fx_file;		/* 4 pages of an ELF file, RX */
static unsigned char *sbuf;		/* 3 pages RW for structs, hole after */
static unsigned char *nbuf;		/* 3 pages RW for names, hole after */
static unsigned char *ro;		/* 1 page, read-only when used */

/*
 * The ELF files that the churn maps: from the root file system (9p in the
 * VM: build-ids only from the page cache), a copy on /tmp (shmem) and, when
 * an ext2 image can be loop-mounted, copies on a block device, which the
 * churn drops from the page cache (POSIX_FADV_DONTNEED, drop_caches) so
 * that their build-ids are read on the way back to user space.
 */
#define EXT2_IMG	"/tmp/fuzz-ext2.img"
#define EXT2_MNT	"/tmp/fuzz-ext2"
static const char *elf_files[] = {
	"/usr/lib/x86_64-linux-gnu/libc.so.6",
	"/usr/lib/x86_64-linux-gnu/libm.so.6",
	"/bin/true",
	"/tmp/fuzz-libm-copy.so",
	EXT2_MNT "/libm.so",
	EXT2_MNT "/true",
};
static int n_elf = 4;
static bool ext2_mounted;

static bool on_ext2(int i)
{
	return !strncmp(elf_files[i], EXT2_MNT "/", strlen(EXT2_MNT) + 1);
}

static int open_elf(int i, off_t *size)
{
	struct stat st;
	int fd = open(elf_files[i], O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st)) {
		close(fd);
		return -1;
	}
	*size = st.st_size;
	/* Cold: the build-id note is read after mmap_lock is dropped. */
	if (on_ext2(i) && rn(100) < 40)
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	return fd;
}

static int sh(const char *cmd)
{
	int rc = system(cmd);

	return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

/* Loop-mount an ext2 image with copies of two ELF files, if we can. */
static void setup_ext2(void)
{
	if (geteuid() || sh("command -v mkfs.ext2 >/dev/null 2>&1"))
		return;
	sh("umount " EXT2_MNT " >/dev/null 2>&1");
	/* losetup, not mount -o loop, which fails in the VM ("already mounted"). */
	if (sh("truncate -s 8M " EXT2_IMG " && mkfs.ext2 -q -F " EXT2_IMG
	       " >/dev/null 2>&1 && mkdir -p " EXT2_MNT " && dev=$(losetup -f --show "
	       EXT2_IMG ") && mount -t ext2 $dev " EXT2_MNT " >/dev/null 2>&1"))
		return;
	ext2_mounted = true;
	if (sh("cp /usr/lib/x86_64-linux-gnu/libm.so.6 " EXT2_MNT "/libm.so && "
	       "cp /bin/true " EXT2_MNT "/true && sync"))
		return;
	n_elf = 6;
}

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out;
	ssize_t n;

	if (in < 0)
		return;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (out < 0) {
		close(in);
		return;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			break;
	close(in);
	close(out);
}

static void setup_fixtures(void)
{
	off_t size;
	int fd;

	fx_rx = guarded(4, PROT_READ | PROT_EXEC);
	fx_two = guarded(2, PROT_READ | PROT_EXEC);
	if (mprotect(fx_two + pg, pg, PROT_READ | PROT_WRITE | PROT_EXEC))
		exit(2);
	fx_rxrw = guarded(2, PROT_READ | PROT_WRITE);
	if (mprotect(fx_rxrw, pg, PROT_READ | PROT_EXEC))
		exit(2);
	fx_none = guarded(1, PROT_NONE);
	sbuf = guarded(3, PROT_READ | PROT_WRITE);
	nbuf = guarded(3, PROT_READ | PROT_WRITE);
	ro = guarded(1, PROT_READ | PROT_WRITE);

	copy_file("/usr/lib/x86_64-linux-gnu/libm.so.6", "/tmp/fuzz-libm-copy.so");
	setup_ext2();
	fd = open_elf(0, &size);
	if (fd < 0) {
		perror(elf_files[0]);
		exit(2);
	}
	fx_file = mmap(NULL, 4 * pg, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	close(fd);
	if (fx_file == MAP_FAILED) {
		perror("mmap libc");
		exit(2);
	}
}

/* ---- recorders ---- */

struct recorder {
	int			fd;
	struct perf_event_attr	attr;	/* as the kernel saw it */
	void			*base;
	size_t			map_len;
	size_t			data_size;
	pid_t			pid;
	int			cpu;
	struct mmap3_check	chk;
};

static struct recorder recs[MAX_REC];
static int n_recs;
static int runtime_fd = -1;		/* a plain dummy event, for the ioctl */
static int notify_efd = -1;

static unsigned long long total_records, total_lost, total_opens, total_open_fails;
static unsigned long long total_mmap3, total_cr_recs, total_bids, total_bid_errs;
static unsigned long long tolerated[160];
static unsigned long long cr_calls, cr_ok, cr_rundowns;

static void drain(struct recorder *r)
{
	if (!r->base || !r->data_size)
		return;
	mmap3_check_drain(&r->chk, r->base, r->data_size);
	if (r->chk.malformed)
		fail("malformed record in recorder fd %d (pid %d cpu %d, mmap3 %d "
		     "code_regions %d sample_type %#llx sample_id_all %d): %s",
		     r->fd, r->pid, r->cpu, r->attr.mmap3, r->attr.code_regions,
		     (unsigned long long)r->attr.sample_type, r->attr.sample_id_all,
		     r->chk.first_reason);
}

static void drain_all(void)
{
	int i;

	for (i = 0; i < n_recs; i++)
		drain(&recs[i]);
}

static void close_rec(int i)
{
	struct recorder *r = &recs[i];

	drain(r);
	total_records += r->chk.records;
	total_lost += r->chk.lost;
	total_mmap3 += r->chk.by_type[MMAP3_TYPE];
	total_cr_recs += r->chk.mmap3_code_regions;
	total_bids += r->chk.mmap3_build_ids;
	total_bid_errs += r->chk.mmap3_build_id_errs;
	if (r->base)
		munmap(r->base, r->map_len);
	close(r->fd);
	mmap3_check_free(&r->chk);
	recs[i] = recs[--n_recs];
}

/* ---- (a) perf_event_open ---- */

static long sys_perf_event_open(void *attr, pid_t pid, int cpu, int group, unsigned long fl)
{
	return syscall(__NR_perf_event_open, attr, pid, cpu, group, fl);
}

static const __u64 sample_bits[] = {
	PERF_SAMPLE_IP, PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ADDR,
	PERF_SAMPLE_ID, PERF_SAMPLE_STREAM_ID, PERF_SAMPLE_CPU, PERF_SAMPLE_PERIOD,
	PERF_SAMPLE_IDENTIFIER, PERF_SAMPLE_CALLCHAIN,
};

/* A child that waits for a byte on @pipe, maps an ELF file, then exits or execs. */
static pid_t waiting_child(int *wfd)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		fail("pipe2: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		char c;
		off_t size;
		int fd;

		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(0);
		fd = open_elf(c % n_elf, &size);
		if (fd >= 0) {
			void *m = mmap(NULL, 2 * pg, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);

			if (m != MAP_FAILED)
				munmap(m, 2 * pg);
			close(fd);
		}
		if ((c & 0x60) == 0x60)
			execl("/bin/true", "true", (char *)NULL);
		_exit(0);
	}
	close(p[0]);
	*wfd = p[1];
	return pid;
}

static void reap(pid_t pid, const char *what)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		fail("waitpid %s: %s", what, strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail("%s %d ended with status %#x", what, pid, status);
}

static void map_ring(struct recorder *r)
{
	unsigned int data_pages = 0, k = rn(100);
	int flags = MAP_SHARED;
	struct errs w = { 0 };
	void *p;

	if (r->cpu == -1 && r->attr.inherit)
		want(&w, EINVAL);	/* no buffer for inherited per-task events */
	if (k < 70) {
		data_pages = 1u << rn(5);
	} else if (k < 78) {
		data_pages = 0;		/* the control page alone */
	} else if (k < 88) {
		static const unsigned int bad[] = { 3, 5, 6, 7, 12 };

		data_pages = bad[rn(5)];
		want(&w, EINVAL);
	} else if (k < 93) {
		data_pages = 1u << rn(3);
		flags = MAP_PRIVATE;
		want(&w, EINVAL);
	} else {
		say(" no-mmap");
		return;
	}
	say(" mmap(%u+1 pages%s)", data_pages, flags == MAP_PRIVATE ? " private" : "");
	p = mmap(NULL, (data_pages + 1) * pg, PROT_READ | PROT_WRITE, flags, r->fd, 0);
	expect("mmap of the ring buffer", p == MAP_FAILED ? -1 : 0, errno, &w, -1);
	if (p == MAP_FAILED)
		return;
	r->base = p;
	r->map_len = (data_pages + 1) * pg;
	r->data_size = data_pages * pg;

	/* Map it again: the same size shares the buffer, another is EINVAL. */
	if (chance(10)) {
		unsigned int again = chance(50) ? data_pages : data_pages * 2 + 1;
		struct errs w2 = { 0 };

		if (again != data_pages || (r->cpu == -1 && r->attr.inherit))
			want(&w2, EINVAL);
		say(" again(%u+1)", again);
		p = mmap(NULL, (again + 1) * pg, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
		expect("second mmap", p == MAP_FAILED ? -1 : 0, errno, &w2, -1);
		if (p != MAP_FAILED)
			munmap(p, (again + 1) * pg);
	}
}

static void op_open(void)
{
	static unsigned char abuf[2 * 4096 + 64] __attribute__((aligned(64)));
	struct perf_event_attr *a = (void *)abuf, ea;
	const size_t asz = sizeof(struct perf_event_attr);
	struct errs w = { 0 };
	unsigned int size, eff, k, i;
	bool plain = true, tail_nz = false, null_attr = false;
	int cpu, wfd = -1, err;
	pid_t pid, child = 0;
	const char *pid_s;
	long fd;

	memset(abuf, 0, sizeof(abuf));
	a->type = PERF_TYPE_SOFTWARE;
	k = rn(10);
	a->config = k < 6 ? PERF_COUNT_SW_DUMMY : k < 8 ? PERF_COUNT_SW_CPU_CLOCK
						      : PERF_COUNT_SW_TASK_CLOCK;
	plain = a->config == PERF_COUNT_SW_DUMMY;
	a->mmap3 = chance(65);
	a->code_regions = chance(a->mmap3 ? 60 : 8);
	a->mmap = chance(12);
	a->mmap2 = chance(12);
	a->build_id = chance(a->mmap2 ? 40 : 5);
	a->mmap_data = chance(40);
	a->comm = chance(40);
	a->task = chance(40);
	a->sample_id_all = chance(70);
	a->inherit = chance(40);
	a->inherit_thread = chance(a->inherit ? 20 : 3);
	a->exclude_kernel = chance(50);
	a->exclude_hv = chance(50);
	a->exclude_user = chance(10);
	a->exclude_idle = chance(10);
	a->disabled = chance(20);
	a->enable_on_exec = chance(10);
	a->watermark = chance(20);
	if (a->watermark)
		a->wakeup_watermark = rn(3 * pg);
	else
		a->wakeup_events = rn(4);
	if (chance(2)) {
		a->__reserved_4 = 1 + rn(3);
		plain = false;
	}
	for (i = 0; i < sizeof(sample_bits) / sizeof(sample_bits[0]); i++)
		if (chance(i < 3 ? 60 : 25))
			a->sample_type |= sample_bits[i];
	if (chance(2)) {
		a->sample_type |= 1ULL << (25 + rn(38));
		plain = false;
	}
	a->read_format = rn(8) | (chance(40) ? PERF_FORMAT_LOST : 0);
	if (chance(2)) {
		a->read_format |= PERF_FORMAT_MAX << rn(10);
		plain = false;
	}
	if (a->config != PERF_COUNT_SW_DUMMY && chance(50)) {
		static const __u64 periods[] = { 1000000, 2000000, 4000000 };

		a->sample_period = periods[rn(3)];
	}
	if (chance(8)) {
		static const int clocks[] = { CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW,
					      CLOCK_REALTIME, CLOCK_BOOTTIME, CLOCK_TAI,
					      1234, CLOCK_PROCESS_CPUTIME_ID };

		a->use_clockid = 1;
		a->clockid = clocks[rn(7)];
		plain = false;
	}

	/* size */
	k = rn(100);
	if (k < 50) {
		size = asz;
	} else if (k < 60) {
		size = 0;		/* read as PERF_ATTR_SIZE_VER0 */
		plain = false;
	} else if (k < 72) {
		size = PERF_ATTR_SIZE_VER0 + rn(asz - PERF_ATTR_SIZE_VER0);
		plain = false;
	} else if (k < 80) {
		size = 1 + rn(PERF_ATTR_SIZE_VER0 - 1);
		plain = false;
	} else if (k < 92) {
		size = asz + 1 + rn(pg - asz);
		tail_nz = chance(50);
		if (tail_nz)
			abuf[asz + rn(size - asz)] = 1 + rn(255);
		plain = false;
	} else {
		size = pg + 1 + rn(pg);
		if (chance(30))
			size = 0xffffffffu - rn(16);
		plain = false;
	}
	a->size = size;
	eff = size ? size : PERF_ATTR_SIZE_VER0;

	/* pid, cpu */
	k = rn(100);
	if (k < 60) {
		pid = chance(50) ? 0 : getpid();
		pid_s = "self";
	} else if (k < 70) {
		child = waiting_child(&wfd);
		pid = child;
		pid_s = "child";
		plain = false;
	} else if (k < 95) {
		pid = -1;
		pid_s = "cpu-wide";
		plain = false;
	} else {
		pid = 0x3fffffff;
		pid_s = "none";
		plain = false;
	}
	k = rn(100);
	cpu = k < 50 ? -1 : k < 73 ? 0 : k < 96 ? 1 : 4096;
	if (cpu >= ncpu && cpu != 4096)
		cpu = -1;
	if (cpu != -1)
		plain = false;
	if (chance(1)) {
		null_attr = true;
		plain = false;
	}

	/* What the kernel sees, and what it must answer. */
	memset(&ea, 0, sizeof(ea));
	memcpy(&ea, abuf, eff < asz ? eff : asz);
	ea.size = eff;
	if (null_attr)
		want(&w, EFAULT);
	if ((size && size < PERF_ATTR_SIZE_VER0) || size > pg || tail_nz)
		want(&w, E2BIG);
	if (ea.__reserved_4)
		want(&w, EINVAL);
	if (ea.mmap3 && (ea.mmap || ea.mmap2 || ea.build_id))
		want(&w, EINVAL);
	if (ea.sample_type & ~(PERF_SAMPLE_MAX - 1ULL))
		want(&w, EINVAL);
	if (ea.read_format & ~(PERF_FORMAT_MAX - 1ULL))
		want(&w, EINVAL);
	if (ea.inherit_thread && !ea.inherit)
		want(&w, EINVAL);
	if (ea.use_clockid && (ea.clockid == 1234 || ea.clockid == CLOCK_PROCESS_CPUTIME_ID))
		want(&w, EINVAL);
	if (pid == -1 && cpu == -1)
		want(&w, EINVAL);
	if (cpu == 4096)
		want(&w, EINVAL);
	if (pid == 0x3fffffff)
		want(&w, ESRCH);

	say("open(cfg %llu size %u%s mmap3 %d cr %d mmap %d mmap2 %d bid %d data %d "
	    "comm %d task %d sid %d inh %d/%d excl k%d h%d u%d i%d dis %d eoe %d wm %d "
	    "st %#llx rf %#llx period %llu clk %d/%d res4 %d, pid %s cpu %d%s)",
	    (unsigned long long)a->config, size, tail_nz ? " tail!=0" : "",
	    a->mmap3, a->code_regions, a->mmap, a->mmap2, a->build_id, a->mmap_data,
	    a->comm, a->task, a->sample_id_all, a->inherit, a->inherit_thread,
	    a->exclude_kernel, a->exclude_hv, a->exclude_user, a->exclude_idle,
	    a->disabled, a->enable_on_exec, a->watermark,
	    (unsigned long long)a->sample_type, (unsigned long long)a->read_format,
	    (unsigned long long)a->sample_period, a->use_clockid, a->clockid,
	    a->__reserved_4, pid_s, cpu, null_attr ? " NULL attr" : "");

	fd = sys_perf_event_open(null_attr ? NULL : abuf, pid, cpu, -1,
				 PERF_FLAG_FD_CLOEXEC);
	err = errno;
	total_opens++;
	if (fd < 0 && !w.any) {
		/* Tolerated, within the allowed set, unless the attr is plain. */
		static const int allowed[] = { EINVAL, E2BIG, EACCES, EPERM, ENOENT,
					       EOPNOTSUPP, EMFILE, ENODEV, ESRCH };

		say(" -> -1 %s", errname(err));
		for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
			if (err == allowed[i])
				break;
		if (plain || i == sizeof(allowed) / sizeof(allowed[0]))
			fail("perf_event_open failed with %s, expected success", errname(err));
		tolerated[err]++;
		total_open_fails++;
	} else {
		expect("perf_event_open", fd, err, &w, -1);
		if (fd < 0)
			total_open_fails++;
	}

	if (fd >= 0) {
		struct recorder *r;

		if (n_recs == MAX_REC) {
			k = rn(MAX_REC);
			say(" close(fd %d)", recs[k].fd);
			close_rec(k);
		}
		r = &recs[n_recs++];
		memset(r, 0, sizeof(*r));
		r->fd = fd;
		r->attr = ea;
		r->pid = pid;
		r->cpu = cpu;
		mmap3_check_init(&r->chk, &ea);
		map_ring(r);
	}
	if (child) {
		char c = rn(128);

		if (write(wfd, &c, 1) != 1)
			fail("write to the child: %s", strerror(errno));
		close(wfd);
		reap(child, "waiting child");
	}
}

/* read() returns the documented layout for the read_format. */
static void op_read(struct recorder *r)
{
	__u64 buf[16];
	size_t n = 8;
	ssize_t got;

	if (r->attr.read_format & PERF_FORMAT_GROUP)
		return;
	n += 8 * __builtin_popcountll(r->attr.read_format &
				      (PERF_FORMAT_TOTAL_TIME_ENABLED |
				       PERF_FORMAT_TOTAL_TIME_RUNNING |
				       PERF_FORMAT_ID | PERF_FORMAT_LOST));
	say("read(fd %d, rf %#llx)", r->fd, (unsigned long long)r->attr.read_format);
	got = read(r->fd, buf, sizeof(buf));
	say(" -> %zd", got);
	if (got != (ssize_t)n)
		fail("read of a recorder returned %zd (%s), expected %zu", got,
		     got < 0 ? errname(errno) : "-", n);
}

static void op_recorders(void)
{
	struct recorder *r;
	struct errs w = { 0 };
	unsigned int k;
	long ret;

	if (!n_recs) {
		op_open();
		return;
	}
	r = &recs[rn(n_recs)];
	k = rn(100);
	if (k < 30) {
		say("close(fd %d)", r->fd);
		close_rec(r - recs);
	} else if (k < 55) {
		unsigned long cmd = chance(50) ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE;

		say("ioctl(fd %d, %s)", r->fd, cmd == PERF_EVENT_IOC_ENABLE ? "ENABLE" : "DISABLE");
		ret = ioctl(r->fd, cmd, 0);
		expect("ioctl ENABLE/DISABLE", ret, errno, &w, -1);
	} else if (k < 70) {
		op_read(r);
	} else if (k < 80) {
		drain(r);
		say("drain(fd %d): %llu records so far", r->fd,
		    (unsigned long long)r->chk.records);
	} else {
		/*
		 * SET_OUTPUT of a recorder without a buffer into one with the
		 * same cpu/task and the same record layout; the kernel may refuse
		 * for its own reasons (EINVAL), never with anything else.
		 */
		struct recorder *o = &recs[rn(n_recs)];

		if (r->base || o == r || !o->base ||
		    o->attr.sample_type != r->attr.sample_type ||
		    o->attr.sample_id_all != r->attr.sample_id_all) {
			op_read(r);
			return;
		}
		say("ioctl(fd %d, SET_OUTPUT, fd %d)", r->fd, o->fd);
		ret = ioctl(r->fd, PERF_EVENT_IOC_SET_OUTPUT, o->fd);
		say(" -> %ld%s%s", ret, ret < 0 ? " " : "", ret < 0 ? errname(errno) : "");
		if (ret < 0 && errno != EINVAL)
			fail("SET_OUTPUT failed with %s", errname(errno));
	}
}

/* ---- (c) churn ---- */

struct churn {
	unsigned char	*p;
	size_t		len;
	int		prot;
};

static struct churn churn[MAX_CHURN];
static int n_churn;

static int rand_prot(void)
{
	static const int prots[] = {
		PROT_READ | PROT_EXEC, PROT_READ | PROT_EXEC, PROT_EXEC,
		PROT_READ, PROT_READ | PROT_WRITE, PROT_NONE,
		PROT_READ | PROT_WRITE | PROT_EXEC,
	};

	return prots[rn(sizeof(prots) / sizeof(prots[0]))];
}

static void churn_map(void)
{
	struct churn *c;
	size_t pages = 2 + rn(6);
	int prot = rand_prot();
	void *p;

	if (n_churn == MAX_CHURN) {
		c = &churn[rn(MAX_CHURN)];
		say("munmap(%p) ", c->p);
		munmap(c->p, c->len);
		*c = churn[--n_churn];
	}
	if (chance(60)) {
		int i = rn(n_elf);
		off_t size, off;
		int fd = open_elf(i, &size);

		if (fd < 0) {
			say("open %s failed", elf_files[i]);
			return;
		}
		off = rn(size / pg + 1) * pg;
		say("mmap(%s +%#llx, %zu pages, prot %d)", elf_files[i],
		    (unsigned long long)off, pages, prot);
		p = mmap(NULL, pages * pg, prot, MAP_PRIVATE, fd, off);
		close(fd);
	} else {
		say("mmap(anon, %zu pages, prot %d)", pages, prot);
		p = mmap(NULL, pages * pg, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	if (p == MAP_FAILED)
		fail("mmap: %s", strerror(errno));
	c = &churn[n_churn++];
	c->p = p;
	c->len = pages * pg;
	c->prot = prot;
}

struct thread_arg {
	unsigned long long seed;
	char err[256];
};

static void *churn_thread(void *arg)
{
	struct thread_arg *t = arg;
	uint64_t s = t->seed;
	int i;

	for (i = 0; i < 3; i++) {
		size_t len = (2 + (s >> (i * 4)) % 4) * pg;
		unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct perf_code_region r = { .size = sizeof(r) };
		char name[32];
		long ret;

		if (p == MAP_FAILED) {
			snprintf(t->err, sizeof(t->err), "thread mmap: %s", strerror(errno));
			return NULL;
		}
		memset(p, 0xc3, len);
		mprotect(p, len, PROT_READ | PROT_EXEC);
		snprintf(name, sizeof(name), "fuzz_thread_%d", i);
		r.addr = (uintptr_t)p;
		r.len = len / 2;
		r.name = (uintptr_t)name;
		ret = syscall(SYS_prctl, PR_PERF_CODE_REGION, CR_ANNOUNCE, &r, 0, 0);
		if (ret) {
			snprintf(t->err, sizeof(t->err), "thread announce returned %ld (%s)",
				 ret, ret < 0 ? errname(errno) : "-");
			return NULL;
		}
		r.flags = CR_UNLOAD;
		ret = syscall(SYS_prctl, PR_PERF_CODE_REGION, CR_ANNOUNCE, &r, 0, 0);
		if (ret) {
			snprintf(t->err, sizeof(t->err), "thread unload returned %ld (%s)",
				 ret, ret < 0 ? errname(errno) : "-");
			return NULL;
		}
		if ((s >> (20 + i)) & 1)
			mprotect(p, pg, PROT_READ);
		munmap(p, len);
	}
	return NULL;
}

static void op_churn(void)
{
	unsigned int k = rn(100);
	struct churn *c;

	if (k < 35 || (k < 60 && !n_churn)) {
		churn_map();
	} else if (k < 48) {
		int prot = rand_prot();

		c = &churn[rn(n_churn)];
		say("mprotect(%p, %zu, %d)", c->p, c->len, prot);
		if (mprotect(c->p, c->len, prot))
			fail("mprotect: %s", strerror(errno));
		c->prot = prot;
	} else if (k < 60) {
		c = &churn[rn(n_churn)];
		say("munmap(%p, %zu)", c->p, c->len);
		munmap(c->p, c->len);
		*c = churn[--n_churn];
	} else if (k < 75) {
		pid_t pid;
		int sel = rn(n_elf);

		say("fork, child maps %s and exits", elf_files[sel]);
		pid = fork();
		if (pid < 0)
			fail("fork: %s", strerror(errno));
		if (pid == 0) {
			off_t size;
			int fd = open_elf(sel, &size);
			void *p;

			if (fd >= 0) {
				p = mmap(NULL, 3 * pg, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
				if (p != MAP_FAILED) {
					mprotect(p, pg, PROT_READ);
					munmap(p, 3 * pg);
				}
			}
			_exit(0);
		}
		reap(pid, "mapping child");
	} else if (k < 80) {
		pid_t pid;

		say("fork+exec /bin/true");
		pid = fork();
		if (pid < 0)
			fail("fork: %s", strerror(errno));
		if (pid == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		reap(pid, "/bin/true");
	} else if (k < 97) {
		struct thread_arg args[3];
		pthread_t th[3];
		int n = 1 + rn(3), i;

		say("%d threads map, announce, unload, unmap", n);
		for (i = 0; i < n; i++) {
			args[i].seed = rnd();
			args[i].err[0] = 0;
			if (pthread_create(&th[i], NULL, churn_thread, &args[i]))
				fail("pthread_create");
		}
		for (i = 0; i < n; i++)
			pthread_join(th[i], NULL);
		for (i = 0; i < n; i++)
			if (args[i].err[0])
				fail("%s", args[i].err);
	} else {
		int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

		say("drop_caches");
		if (fd >= 0) {
			if (write(fd, "1", 1) < 0)
				say(" (%s)", strerror(errno));
			close(fd);
		}
	}
}

/* ---- (b) code regions ---- */

struct range {
	__u64	addr, len;
	bool	exec;		/* all mapped executable: a load is fine */
	bool	bad;		/* EINVAL for a load and an unload */
	const char *what;
};

static struct range pick_range(void)
{
	struct range r = { 0 };
	unsigned int k = rn(100);
	__u64 off;

	if (k < 30) {
		off = rn(4 * pg - 1);
		r = (struct range){ (uintptr_t)fx_rx + off, 1 + rn(4 * pg - off), true,
				    false, "rx" };
	} else if (k < 40) {
		off = rn(pg);
		r = (struct range){ (uintptr_t)fx_two + off, pg - off + 1 + rn(pg), true,
				    false, "rx+rwx vmas" };
	} else if (k < 48) {
		off = rn(pg);
		r = (struct range){ (uintptr_t)fx_rxrw + off, pg - off + 1 + rn(pg), false,
				    false, "rx into rw" };
	} else if (k < 55) {
		off = rn(4 * pg);
		if (!page_mapped(fx_rx + 4 * pg)) {
			r = (struct range){ (uintptr_t)fx_rx + off, 4 * pg - off + 1 + rn(pg),
					    false, false, "rx into a hole" };
		} else {
			r = (struct range){ (uintptr_t)fx_rx, 1, true, false, "rx (hole filled)" };
		}
	} else if (k < 59) {
		r = (struct range){ (uintptr_t)fx_none + rn(pg), 1 + rn(64), false, false,
				    "PROT_NONE" };
	} else if (k < 67) {
		off = rn(4 * pg - 1);
		r = (struct range){ (uintptr_t)fx_file + off, 1 + rn(4 * pg - off), true,
				    false, "file rx" };
	} else if (k < 77 && n_churn) {
		struct churn *c = &churn[rn(n_churn)];

		off = rn(c->len - 1);
		r = (struct range){ (uintptr_t)c->p + off, 1 + rn(c->len - off),
				    !!(c->prot & PROT_EXEC), false, "churn" };
	} else if (k < 81) {
		r = (struct range){ 0, pg, false, false, "page 0" };
	} else if (k < 85) {
		r = (struct range){ KERNEL_ADDR + rn(pg), 1 + rn(pg), false, true, "kernel" };
	} else if (k < 89) {
		r = (struct range){ ~0ULL - rn(64), 64 + rn(1000), false, true, "overflow" };
	} else if (k < 93) {
		r = (struct range){ (uintptr_t)fx_rx, 1ULL << 63, false, true,
				    "past user space" };
	} else if (k < 97) {
		r = (struct range){ (uintptr_t)fx_rx + rn(pg), 0, false, true, "len 0" };
	} else {
		r = (struct range){ (uintptr_t)fx_rx, ~0ULL, false, true, "len ~0" };
	}
	return r;
}

/* The name, and what it makes the call answer (0: fine). */
static __u64 pick_name(int *err, char *what, size_t n)
{
	unsigned int k = rn(100), len, i;
	char *s = (char *)nbuf;

	*err = 0;
	if (k < 15) {
		snprintf(what, n, "NULL");
		return 0;
	}
	if (k < 55) {
		len = rn(40);
		for (i = 0; i < len; i++)
			s[i] = 'a' + rn(26);
		s[len] = 0;
		snprintf(what, n, "%u chars", len);
		return (uintptr_t)s;
	}
	if (k < 63) {
		len = CR_NAME_MAX - 1;
		memset(s, 'n', len);
		s[len] = 0;
		snprintf(what, n, "4095 chars");
		return (uintptr_t)s;
	}
	if (k < 70) {
		len = chance(60) ? CR_NAME_MAX : CR_NAME_MAX + rn(3 * pg - CR_NAME_MAX - 1);
		memset(s, 'n', len);
		s[len] = 0;
		*err = ENAMETOOLONG;
		snprintf(what, n, "%u chars", len);
		return (uintptr_t)s;
	}
	if (k < 75) {
		/* Ends with its NUL at the last byte before the hole. */
		len = rn(100);
		memset(nbuf + 3 * pg - len - 1, 'e', len);
		nbuf[3 * pg - 1] = 0;
		snprintf(what, n, "%u chars at the edge", len);
		if (!page_mapped(nbuf + 3 * pg))
			return (uintptr_t)nbuf + 3 * pg - len - 1;
		return 0;
	}
	if (k < 80) {
		/* Runs into the hole. */
		len = 1 + rn(100);
		memset(nbuf + 3 * pg - len, 'f', len);
		snprintf(what, n, "%u chars into the hole", len);
		if (page_mapped(nbuf + 3 * pg))
			return 0;
		*err = EFAULT;
		return (uintptr_t)nbuf + 3 * pg - len;
	}
	if (k < 85) {
		snprintf(what, n, "unmapped");
		if (page_mapped(nbuf + 3 * pg))
			return 0;
		*err = EFAULT;
		return (uintptr_t)nbuf + 3 * pg + rn(pg);
	}
	if (k < 90) {
		snprintf(what, n, "PROT_NONE");
		*err = EFAULT;
		return (uintptr_t)fx_none + rn(pg);
	}
	if (k < 93) {
		snprintf(what, n, "kernel");
		*err = EFAULT;
		return KERNEL_ADDR;
	}
	snprintf(what, n, "read-only");
	return (uintptr_t)"fuzz_read_only_name";
}

static void op_code_region(void)
{
	struct perf_code_region r;
	struct errs w = { 0 };
	struct range rg;
	unsigned char *p = NULL;
	unsigned int k, size, i;
	bool tail_nz = false;
	unsigned long a4 = 0, a5 = 0, op = CR_ANNOUNCE;
	int name_err;
	char name_what[64];
	const char *loc;
	long ret;
	int err;

	memset(&r, 0, sizeof(r));
	/* flags */
	k = rn(100);
	if (k < 45)
		r.flags = 0;
	else if (k < 75)
		r.flags = CR_UNLOAD;
	else if (k < 87)
		r.flags = CR_RUNDOWN;
	else if (k < 92)
		r.flags = CR_UNLOAD | CR_RUNDOWN;
	else
		r.flags = 1u << (2 + rn(30));
	if (r.flags & ~(CR_UNLOAD | CR_RUNDOWN) ||
	    (r.flags & (CR_UNLOAD | CR_RUNDOWN)) == (CR_UNLOAD | CR_RUNDOWN))
		want(&w, EINVAL);

	rg = pick_range();
	r.addr = rg.addr;
	r.len = rg.len;
	r.pgoff = chance(50) ? 0 : rnd() & ~0xfffULL;
	if (rg.bad || (!rg.exec && !(r.flags & CR_UNLOAD)))
		want(&w, EINVAL);

	r.name = pick_name(&name_err, name_what, sizeof(name_what));
	if (name_err)
		want(&w, name_err);

	/* build-id */
	k = rn(100);
	r.build_id_size = k < 25 ? 0 : k < 60 ? 20 : k < 90 ? rn(21) : 21 + rn(5);
	for (i = 0; i < r.build_id_size && i < 20; i++)
		r.build_id[i] = rnd();
	if (r.build_id_size > 20)
		want(&w, EINVAL);
	if (r.build_id_size < 20 && chance(8)) {
		r.build_id[r.build_id_size + rn(20 - r.build_id_size)] = 1 + rn(255);
		/* Bytes past build_id_size must be zero. */
		want(&w, EINVAL);
		say("build-id bytes past the size; ");
	}
	if (chance(3)) {
		r.__reserved[rn(3)] = 1 + rn(255);
		want(&w, EINVAL);
	}

	/* size, and where the structure is */
	k = rn(100);
	if (k < 60)
		size = CR_SIZE_VER0;
	else if (k < 65)
		size = 0;
	else if (k < 70)
		size = 1 + rn(CR_SIZE_VER0 - 1);
	else if (k < 88)
		size = CR_SIZE_VER0 + 1 + rn(pg - CR_SIZE_VER0);
	else if (k < 96)
		size = pg + 1 + rn(2 * pg - 1);
	else
		size = 0xffffffffu - rn(64);
	r.size = size;
	if (size < CR_SIZE_VER0)
		want(&w, EINVAL);
	if (size > pg)
		want(&w, E2BIG);

	k = rn(100);
	if (k < 80 || size > pg) {
		/* In sbuf, from its start or so that it runs into the hole. */
		size_t off = 0, readable;

		loc = "rw";
		memset(sbuf, 0, 3 * pg);
		if (chance(8) && size <= pg) {
			if (size < CR_SIZE_VER0 || chance(50))
				off = 3 * pg - 32;
			else
				off = 3 * pg - CR_SIZE_VER0 - rn(size - CR_SIZE_VER0 + 1);
			loc = "rw into the hole";
		}
		p = sbuf + off;
		readable = 3 * pg - off;
		memcpy(p, &r, readable < sizeof(r) ? readable : sizeof(r));
		if (page_mapped(sbuf + 3 * pg))
			readable = ~0UL;	/* somebody mapped the hole */
		if (size > CR_SIZE_VER0 && chance(40)) {
			size_t end = size < readable ? size : readable;

			if (end > CR_SIZE_VER0) {
				p[CR_SIZE_VER0 + rn(end - CR_SIZE_VER0)] = 1 + rn(255);
				tail_nz = true;
				want(&w, E2BIG);
			}
		}
		if (readable < (size > CR_SIZE_VER0 ? size : CR_SIZE_VER0))
			want(&w, EFAULT);
	} else if (k < 88) {
		loc = "read-only";
		mprotect(ro, pg, PROT_READ | PROT_WRITE);
		memset(ro, 0, pg);
		memcpy(ro, &r, sizeof(r));
		if (size > CR_SIZE_VER0 && chance(30)) {
			ro[CR_SIZE_VER0 + rn(size - CR_SIZE_VER0)] = 1;
			tail_nz = true;
			want(&w, E2BIG);
		}
		mprotect(ro, pg, PROT_READ);
		p = ro;
	} else {
		static const char *const where[] = { "NULL", "unmapped", "kernel", "PROT_NONE" };
		int j = rn(4);

		loc = where[j];
		p = j == 0 ? NULL : j == 1 ? sbuf + 3 * pg : j == 2 ? (void *)KERNEL_ADDR : fx_none;
		if (j == 1 && page_mapped(p))
			p = NULL;
		/* Nothing of it can be read: only EFAULT. */
		memset(&w, 0, sizeof(w));
		want(&w, EFAULT);
	}

	/* How it is called. */
	{
		k = rn(100);
		if (k < 3) {
			a4 = 1 + rn(100);
			want(&w, EINVAL);
		} else if (k < 6) {
			a5 = rnd() | 1;
			want(&w, EINVAL);
		} else if (k < 9) {
			static const unsigned long ops[] = { 0, 3, 0x100, ~0UL };

			op = ops[rn(4)];
			memset(&w, 0, sizeof(w));
			want(&w, EINVAL);
		}
	}

	say("prctl(op %lu a4 %#lx a5 %#lx, struct %s size %u%s flags %#x addr %#llx "
	    "len %#llx (%s) pgoff %#llx name %s bid %u res %02x%02x%02x)",
	    op, a4, a5, loc, size,
	    tail_nz ? " tail!=0" : "", r.flags, (unsigned long long)r.addr,
	    (unsigned long long)r.len, rg.what, (unsigned long long)r.pgoff, name_what,
	    r.build_id_size, r.__reserved[0], r.__reserved[1], r.__reserved[2]);

	errno = 0;
	ret = syscall(SYS_prctl, PR_PERF_CODE_REGION, op, p, a4, a5);
	err = errno;
	cr_calls++;
	/* 0, whoever records. */
	expect("code region", ret, err, &w, 0);
	if (ret >= 0)
		cr_ok++;
}

/*
 * PERF_EVENT_IOC_CODE_REGION_RUNDOWN on a recorder (0, or EINVAL without
 * code_regions or with an argument, ENODATA while it cannot take records),
 * the runtime's event (EINVAL: no code_regions) or the eventfd (ENOTTY).
 */
static void op_rundown(void)
{
	unsigned long arg = chance(10) ? 1 + rn(100) : 0;
	unsigned int k = rn(100);
	bool code_regions = false;
	const char *what;
	long ret;
	int fd, err;

	if (k < 70 && n_recs) {
		int j = rn(n_recs);

		fd = recs[j].fd;
		code_regions = recs[j].attr.code_regions;
		what = code_regions ? "recorder" : "recorder without code_regions";
	} else if (k < 90) {
		fd = runtime_fd;
		what = "runtime fd";
	} else {
		fd = notify_efd;
		what = "eventfd";
	}
	say("ioctl(%s %d, CODE_REGION_RUNDOWN, %lu)", what, fd, arg);
	errno = 0;
	ret = ioctl(fd, PERF_EVENT_IOC_CODE_REGION_RUNDOWN, arg);
	err = errno;
	say(" -> %ld%s%s", ret, ret < 0 ? " " : "", ret < 0 ? errname(err) : "");
	if (fd == notify_efd) {
		if (ret != -1 || err != ENOTTY)
			fail("rundown ioctl on an eventfd: %ld %s, expected ENOTTY", ret,
			     errname(err));
	} else if (fd == runtime_fd || arg || !code_regions) {
		if (ret != -1 || err != EINVAL)
			fail("rundown ioctl on the %s, argument %lu: %ld %s, expected EINVAL",
			     what, arg, ret, errname(err));
	} else if (ret && err != ENODATA) {
		fail("rundown ioctl on a recorder: %s, expected 0 or ENODATA", errname(err));
	}
	if (!ret)
		cr_rundowns++;
}

static void op_notify(void)
{
	struct errs w = { 0 };
	unsigned long fd, a4 = 0;
	unsigned int k = rn(100);
	int p[2] = { -1, -1 };
	const char *what;
	long ret;

	if (k < 35) {
		fd = notify_efd;
		what = "eventfd";
	} else if (k < 50) {
		fd = chance(50) ? -1UL : 0xffffffffUL;
		what = "-1";
	} else if (k < 62) {
		fd = 900 + rn(100);	/* not open: RLIMIT_NOFILE is far above our fds */
		if (fcntl(fd, F_GETFD) >= 0)
			fd = 999;
		what = "closed fd";
		want(&w, EBADF);
	} else if (k < 68) {
		fd = (1UL << 32) + rn(1000);
		what = "fd > INT_MAX";
		want(&w, EBADF);
	} else if (k < 80) {
		if (pipe2(p, O_CLOEXEC))
			fail("pipe2");
		fd = p[0];
		what = "pipe";
		want(&w, EINVAL);
	} else if (k < 90) {
		fd = runtime_fd;
		what = "perf fd";
		want(&w, EINVAL);
	} else {
		/* Drain the eventfd; announce the live region for the recorders. */
		struct perf_code_region r = {
			.size = sizeof(r), .flags = CR_RUNDOWN,
			.addr = (uintptr_t)fx_rx, .len = 4 * pg,
			.name = (uintptr_t)"fuzz_rundown",
		};
		uint64_t n = 0;

		ret = read(notify_efd, &n, sizeof(n));
		say("read(eventfd) -> %ld (%llu); rundown", ret, (unsigned long long)n);
		ret = syscall(SYS_prctl, PR_PERF_CODE_REGION, CR_ANNOUNCE, &r, 0, 0);
		expect("rundown announce", ret, errno, &w, 0);
		return;
	}
	if (chance(5)) {
		a4 = 1;
		want(&w, EINVAL);
	}
	say("prctl(REGISTER, %s %#lx, a4 %lu)", what, fd, a4);
	ret = syscall(SYS_prctl, PR_PERF_CODE_REGION, CR_REGISTER, fd, a4, 0);
	expect("PR_PERF_CODE_REGION_REGISTER", ret, errno, &w, 0);
	if (p[0] >= 0) {
		close(p[0]);
		close(p[1]);
	}
}

/* ---- main ---- */

static long read_tainted(void)
{
	char buf[64] = "";
	int fd = open("/proc/sys/kernel/tainted", O_RDONLY);

	if (fd < 0)
		return -1;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = 0;
	close(fd);
	return strtol(buf, NULL, 10);
}

static void usage(void)
{
	fprintf(stderr, "usage: fuzz [--seed S] [--iterations N] [--verbose]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr), .type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_DUMMY, .mmap3 = 1, .exclude_kernel = 1,
	};
	struct timespec t0, t1;
	long taint0, taint1;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
			iterations = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--verbose"))
			verbose = 1;
		else
			usage();
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	pg = sysconf(_SC_PAGESIZE);
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	rng = seed;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	taint0 = read_tainted();
	setup_fixtures();
	printf("debug/fuzz: seed %llu, %lu iterations, ELF files on ext2: %s\n", seed,
	       iterations, n_elf == 6 ? "yes" : "no (a replay needs the same)");
	runtime_fd = sys_perf_event_open(&attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (runtime_fd < 0) {
		printf("FAIL debug/fuzz: cannot open an mmap3 event: %s\n", strerror(errno));
		return 1;
	}
	notify_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (notify_efd < 0) {
		printf("FAIL debug/fuzz: eventfd: %s\n", strerror(errno));
		return 1;
	}

	for (iter = 0; iter < iterations; iter++) {
		unsigned int k = rn(100);

		desc_len = 0;
		desc[0] = 0;
		say("#%lu ", iter);
		if (k < 18)
			op_open();
		else if (k < 30)
			op_recorders();
		else if (k < 66)
			op_code_region();
		else if (k < 72)
			op_rundown();
		else if (k < 80)
			op_notify();
		else
			op_churn();
		if (verbose) {
			clock_gettime(CLOCK_MONOTONIC, &t1);
			printf("%8.3f %s\n", (t1.tv_sec - t0.tv_sec) +
			       (t1.tv_nsec - t0.tv_nsec) / 1e9, desc);
		}
		memcpy(history[iter % 8], desc, desc_len + 1);
		if (iter % 64 == 63)
			drain_all();
	}
	desc_len = 0;
	desc[0] = 0;
	say("final drain");
	while (n_recs)
		close_rec(n_recs - 1);
	while (n_churn)
		munmap(churn[n_churn - 1].p, churn[n_churn - 1].len), n_churn--;

	if (ext2_mounted)
		sh("umount " EXT2_MNT " >/dev/null 2>&1; losetup -j " EXT2_IMG
		   " | cut -d: -f1 | xargs -r losetup -d; rm -f " EXT2_IMG);
	taint1 = read_tainted();
	if (taint1 != taint0)
		fail("/proc/sys/kernel/tainted changed from %ld to %ld", taint0, taint1);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	printf("debug/fuzz: %llu perf_event_open (%llu failed", total_opens, total_open_fails);
	for (i = 1; i < 160; i++)
		if (tolerated[i])
			printf(", %llu tolerated %s", tolerated[i], errname(i));
	printf("), %llu code-region calls (%llu succeeded), %llu rundown requests; MMAP3 "
	       "records %llu (%llu code regions, %llu with a build-id, %llu "
	       "BUILD_ID_ERR); %.1f s\n",
	       cr_calls, cr_ok, cr_rundowns, total_mmap3, total_cr_recs, total_bids, total_bid_errs,
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	printf("PASS debug/fuzz (seed %llu, %lu iterations, %llu records checked, %llu lost)\n",
	       seed, iterations, total_records, total_lost);
	return 0;
}
