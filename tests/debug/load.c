// SPDX-License-Identifier: GPL-2.0
/*
 * load: 32 threads announce and unload code regions while recorders start
 * and stop around them, with small ring buffers, so that records are lost.
 *
 *   load [--threads N] [--count C] [--seed S]
 *
 * Each announcer thread has its own executable pages, name and 20-byte
 * build-id, and announces a load and an unload C times with
 * prctl(PR_PERF_CODE_REGION), which must return 0 each time; pgoff numbers the
 * records of a thread (2j for the j-th load, 2j+1 for its unload).
 *
 * The recorders (PERF_RECORD_MMAP3 + code_regions):
 *  - per CPU, inherited by every thread (pid = getpid(), inherit, cpu c):
 *    a large one drained all the time and a tiny one (1 page) drained
 *    every 200 ms;
 *  - per thread (pid = tid) for every fourth announcer, opened before the
 *    announcers start; the one of thread 0 is tiny and slow;
 *  - recorders that start and stop all the time: two threads of this
 *    process and a separate recorder process, per-thread and CPU-wide.
 * Every record of every recorder goes through mmap3-check.h, and each code
 * region record must be one that an announcer made: its name one of the
 * names, its tid, address, length, build-id and flags those of the name's
 * thread, its pgoff a record number of that thread, increasing within a
 * recorder. A torn record would mix them: it is a FAIL.
 *
 * Accounting, for the recorders that watch from start to end: every
 * announce of a watched thread was received or counted lost (received +
 * lost >= announces, received <= announces); the sum of the lost counts in
 * PERF_RECORD_LOST equals the event's lost counter read() with
 * PERF_FORMAT_LOST (after a flush: one more record written into the empty
 * buffer carries the pending lost count); at least one tiny recorder lost
 * records; and no recorder received more code-region records than the
 * announcers made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "mmap3-check.h"

#include <linux/prctl.h>

#ifndef PR_PERF_CODE_REGION
#error "needs the uapi prctl.h of the patched tree"
#endif

#define MAX_THREADS		64
#define MAX_CPUS		8
#define MAIN			MAX_THREADS	/* index of the main thread's region */

static int nthreads = 32, count = 2000, ncpu;
static unsigned long long seed = 1;
static long pg;

/* What the announcers are, shared with the recorder process. */
struct shared {
	_Atomic int	phase;		/* 0 setup, 1 running, 2 stop */
	pid_t		pid;
	pid_t		tids[MAX_THREADS + 1];
	__u64		addrs[MAX_THREADS + 1];
	/* Results of the recorder process. */
	__u64		child_records, child_cr, child_lost, child_opens;
	char		child_err[512];
};

static struct shared *sh;

static void name_of(int i, char *buf, size_t n)
{
	int k;

	if (i == MAIN) {
		snprintf(buf, n, "load_main_flush");
		return;
	}
	/* Names of different lengths, so that records differ in size. */
	k = snprintf(buf, n, "load_t%02d_", i);
	while (k < 10 + (i * 7) % 41 && k < (int)n - 1)
		buf[k++] = 'a' + i % 26;
	buf[k] = 0;
}

static __u64 len_of(int i)
{
	return 64 + 8 * i;
}

static void build_id_of(int i, __u8 *b)
{
	int j;

	for (j = 0; j < 20; j++)
		b[j] = (__u8)(i * 37 + j * 11 + 1);
}

static char names[MAX_THREADS + 1][64];
static size_t name_lens[MAX_THREADS + 1];
static __u8 build_ids[MAX_THREADS + 1][20];

static void init_names(void)
{
	int i;

	for (i = 0; i <= MAX_THREADS; i++) {
		name_of(i, names[i], sizeof(names[i]));
		name_lens[i] = strlen(names[i]);
		build_id_of(i, build_ids[i]);
	}
}

/* ---- recorders ---- */

struct rec {
	const char		*kind;
	int			fd;
	void			*base;
	size_t			map_len;
	size_t			data_size;
	int			target;		/* thread index, -1: all */
	int			cpu;
	struct mmap3_check	chk;
	__u64			cr;		/* code regions of the announcers */
	__u64			cr_of[MAX_THREADS + 1];
	__u64			flushes;
	__s64			last_pgoff[MAX_THREADS + 1];
};

static int cr_check(void *arg, const struct perf_event_header *h,
		    const struct mmap3_view *v, char *why)
{
	struct rec *r = arg;
	const struct mmap3_fixed *m;
	__u16 want_flags;
	int i;

	if (!v || !(v->r->mmap3_flags & MMAP3_F_CODE_REGION))
		return 0;
	m = v->r;
	if (m->pid != (__u32)sh->pid) {
		snprintf(why, 256, "code region of pid %u: nobody else announces", m->pid);
		return 1;
	}
	for (i = 0; i <= MAX_THREADS; i++)
		if ((i < nthreads || i == MAIN) && v->filename_len == name_lens[i] &&
		    !memcmp(v->filename, names[i], name_lens[i]))
			break;
	if (i > MAX_THREADS) {
		snprintf(why, 256, "code region named \"%.60s\" (%zu chars): no thread has it",
			 v->filename, v->filename_len);
		return 1;
	}
	if (m->tid != (__u32)sh->tids[i] || m->addr != sh->addrs[i] || m->len != len_of(i)) {
		snprintf(why, 256, "code region \"%s\" with tid %u addr %#llx len %llu, the "
			 "thread's are %d %#llx %llu", names[i], m->tid,
			 (unsigned long long)m->addr, (unsigned long long)m->len,
			 sh->tids[i], (unsigned long long)sh->addrs[i],
			 (unsigned long long)len_of(i));
		return 1;
	}
	if (m->build_id_size != 20 || memcmp(v->build_id, build_ids[i], 20)) {
		snprintf(why, 256, "code region \"%s\" with another build-id (size %u)",
			 names[i], m->build_id_size);
		return 1;
	}
	if (m->pgoff > 2ULL * count || (__s64)m->pgoff <= r->last_pgoff[i]) {
		snprintf(why, 256, "code region \"%s\" number %llu after %lld", names[i],
			 (unsigned long long)m->pgoff, (long long)r->last_pgoff[i]);
		return 1;
	}
	r->last_pgoff[i] = m->pgoff;
	want_flags = MMAP3_F_CODE_REGION | (m->pgoff & 1 ? MMAP3_F_UNMAP : 0);
	if (m->mmap3_flags != want_flags) {
		snprintf(why, 256, "code region \"%s\" number %llu with flags %#x", names[i],
			 (unsigned long long)m->pgoff, m->mmap3_flags);
		return 1;
	}
	if (m->pgoff == 2ULL * count) {
		r->flushes++;
	} else {
		r->cr++;
		r->cr_of[i]++;
	}
	(void)h;
	return 0;
}

static long sys_perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu)
{
	return syscall(__NR_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static struct perf_event_attr rec_attr(bool inherit)
{
	struct perf_event_attr a = {
		.size		= sizeof(a),
		.type		= PERF_TYPE_SOFTWARE,
		.config		= PERF_COUNT_SW_DUMMY,
		.sample_type	= PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU,
		.read_format	= PERF_FORMAT_LOST,
		.sample_id_all	= 1,
		.exclude_kernel	= 1,
		.exclude_hv	= 1,
		.mmap3		= 1,
		.code_regions	= 1,
		.task		= 1,
		.inherit	= inherit,
	};
	return a;
}

/* Returns -errno. */
static int rec_open(struct rec *r, const char *kind, bool inherit, pid_t pid, int cpu,
		    int target, unsigned int data_pages)
{
	struct perf_event_attr a = rec_attr(inherit);
	int i;

	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->target = target;
	r->cpu = cpu;
	for (i = 0; i <= MAX_THREADS; i++)
		r->last_pgoff[i] = -1;
	r->fd = sys_perf_event_open(&a, pid, cpu);
	if (r->fd < 0)
		return -errno;
	r->map_len = (data_pages + 1) * pg;
	r->data_size = data_pages * pg;
	r->base = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->base == MAP_FAILED) {
		int err = -errno;

		close(r->fd);
		r->fd = -1;
		return err;
	}
	mmap3_check_init(&r->chk, &a);
	r->chk.cb = cr_check;
	r->chk.cb_arg = r;
	return 0;
}

static void rec_close(struct rec *r)
{
	munmap(r->base, r->map_len);
	close(r->fd);
	mmap3_check_free(&r->chk);
	r->fd = -1;
}

static void rec_drain(struct rec *r)
{
	mmap3_check_drain(&r->chk, r->base, r->data_size);
}

/* The lost counter of read() with PERF_FORMAT_LOST. */
static __u64 rec_read_lost(struct rec *r)
{
	__u64 v[2] = { 0, 0 };

	if (read(r->fd, v, sizeof(v)) != sizeof(v))
		return ~0ULL;
	return v[1];
}

/* ---- random numbers, per thread ---- */

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* ---- the announcers ---- */

static pthread_barrier_t ready_bar, start_bar, done_bar, flush_bar, flushed_bar;
static _Atomic unsigned long long announces_total;
static char announce_err[256];
static _Atomic int failed;

static long announce(int i, __u64 pgoff, bool unload)
{
	struct perf_code_region r = {
		.size		= sizeof(r),
		.flags		= unload ? PERF_CODE_REGION_UNLOAD : 0,
		.addr		= sh->addrs[i],
		.len		= len_of(i),
		.pgoff		= pgoff,
		.name		= (uintptr_t)names[i],
		.build_id_size	= 20,
	};

	memcpy(r.build_id, build_ids[i], 20);
	return syscall(SYS_prctl, PR_PERF_CODE_REGION, PR_PERF_CODE_REGION_ANNOUNCE, &r, 0, 0);
}

static void *announcer(void *arg)
{
	int i = (long)arg, j;
	unsigned char *code;

	code = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED)
		abort();
	memset(code, 0xc3, 2 * pg);
	mprotect(code, 2 * pg, PROT_READ | PROT_EXEC);
	sh->addrs[i] = (uintptr_t)code + 16 * i;
	sh->tids[i] = syscall(SYS_gettid);
	pthread_barrier_wait(&ready_bar);
	pthread_barrier_wait(&start_bar);

	for (j = 0; j < count; j++) {
		long a = announce(i, 2 * j, false);
		long u = announce(i, 2 * j + 1, true);

		if (a || u) {
			if (!atomic_exchange(&failed, 1))
				snprintf(announce_err, sizeof(announce_err),
					 "thread %d announce %d returned %ld/%ld: %s", i, j,
					 a, u, strerror(errno));
			break;
		}
	}
	atomic_fetch_add(&announces_total, 2ULL * j);

	/* The flush: one record into each of this thread's drained buffers. */
	pthread_barrier_wait(&done_bar);
	pthread_barrier_wait(&flush_bar);
	announce(i, 2ULL * count, false);
	pthread_barrier_wait(&flushed_bar);
	munmap(code, 2 * pg);
	return NULL;
}

/* ---- drainers ---- */

static struct rec cpu_big[MAX_CPUS], cpu_tiny[MAX_CPUS];
static struct rec per_thread[MAX_THREADS];
static int n_per_thread, n_cpu_recs;
static _Atomic int stop_drain, stop_churn;

static void *fast_drainer(void *arg)
{
	int c, i;

	(void)arg;
	while (!atomic_load(&stop_drain)) {
		for (c = 0; c < n_cpu_recs; c++)
			rec_drain(&cpu_big[c]);
		for (i = 1; i < n_per_thread; i++)
			rec_drain(&per_thread[i]);
		usleep(1000);
	}
	return NULL;
}

static void *slow_drainer(void *arg)
{
	int c;

	(void)arg;
	while (!atomic_load(&stop_drain)) {
		for (c = 0; c < n_cpu_recs; c++)
			rec_drain(&cpu_tiny[c]);
		if (n_per_thread)
			rec_drain(&per_thread[0]);
		usleep(200000);
	}
	return NULL;
}

/* ---- recorders that start and stop ---- */

struct churn_stats {
	__u64	opens, records, cr, lost, tolerated;
	char	err[512];
};

/* One short-lived recorder: open, drain a while, disable, drain, close. */
static int churn_once(uint64_t *s, struct churn_stats *st, bool cpu_wide_ok)
{
	struct rec r;
	int t = rnd(s) % nthreads, cpu = -1, err, k;
	pid_t pid = sh->tids[t];
	const char *kind = "per-thread";

	if (cpu_wide_ok && rnd(s) % 3 == 0) {
		pid = -1;
		cpu = rnd(s) % ncpu;
		kind = "cpu-wide";
		t = -1;
	}
	err = rec_open(&r, kind, false, pid, cpu, t, 1u << (rnd(s) % 3));
	if (err) {
		/* The thread may have ended; nothing else may go wrong. */
		if (err == -ESRCH) {
			st->tolerated++;
			return 0;
		}
		snprintf(st->err, sizeof(st->err), "%s recorder (pid %d cpu %d): %s",
			 kind, pid, cpu, strerror(-err));
		return -1;
	}
	st->opens++;
	for (k = rnd(s) % 20; k >= 0; k--) {
		rec_drain(&r);
		usleep(500 + rnd(s) % 2000);
	}
	ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0);
	rec_drain(&r);
	st->records += r.chk.records;
	st->cr += r.cr;
	st->lost += r.chk.lost;
	if (r.chk.malformed) {
		snprintf(st->err, sizeof(st->err), "%s recorder (pid %d cpu %d): %s", kind,
			 pid, cpu, r.chk.first_reason);
		rec_close(&r);
		return -1;
	}
	rec_close(&r);
	return 0;
}

struct churner {
	pthread_t		th;
	uint64_t		seed;
	bool			cpu_wide_ok;
	struct churn_stats	st;
};

static void *churn_thread(void *arg)
{
	struct churner *c = arg;

	while (!atomic_load(&stop_churn))
		if (churn_once(&c->seed, &c->st, c->cpu_wide_ok))
			break;
	return NULL;
}

/* The recorder process: forked before any thread, it watches from outside. */
static void recorder_process(bool cpu_wide_ok)
{
	struct churn_stats st = { 0 };
	uint64_t s = seed * 7919 + 1;

	while (atomic_load(&sh->phase) == 0)
		usleep(1000);
	while (atomic_load(&sh->phase) == 1)
		if (churn_once(&s, &st, cpu_wide_ok))
			break;
	sh->child_records = st.records;
	sh->child_cr = st.cr;
	sh->child_lost = st.lost;
	sh->child_opens = st.opens;
	snprintf(sh->child_err, sizeof(sh->child_err), "%s", st.err);
	_exit(st.err[0] ? 1 : 0);
}

/* ---- main ---- */

static int fails;

__attribute__((format(printf, 1, 2)))
static void failf(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL debug/load: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fails++;
}

static void report(struct rec *r, const char *what, __u64 announces)
{
	__u64 lost_read = rec_read_lost(r);
	char sum[512];

	mmap3_check_summary(&r->chk, sum, sizeof(sum));
	printf("  %s: %llu code regions, %llu flushes, %llu lost in PERF_RECORD_LOST, "
	       "read() lost %llu; %s\n", what, (unsigned long long)r->cr,
	       (unsigned long long)r->flushes, (unsigned long long)r->chk.lost,
	       (unsigned long long)lost_read, sum);
	if (r->chk.malformed)
		failf("%s: %s", what, r->chk.first_reason);
	if (lost_read != r->chk.lost)
		failf("%s: PERF_RECORD_LOST reported %llu lost, read() with "
		      "PERF_FORMAT_LOST %llu", what, (unsigned long long)r->chk.lost,
		      (unsigned long long)lost_read);
	if (announces && r->cr > announces)
		failf("%s: %llu code regions received of %llu announced", what,
		      (unsigned long long)r->cr, (unsigned long long)announces);
	if (announces && r->cr + r->chk.lost < announces)
		failf("%s: %llu code regions received + %llu lost < %llu announced", what,
		      (unsigned long long)r->cr, (unsigned long long)r->chk.lost,
		      (unsigned long long)announces);
}

static long read_tainted(void)
{
	FILE *f = fopen("/proc/sys/kernel/tainted", "r");
	long t = -1;

	if (f) {
		if (fscanf(f, "%ld", &t) != 1)
			t = -1;
		fclose(f);
	}
	return t;
}

int main(int argc, char **argv)
{
	pthread_t threads[MAX_THREADS], fast, slow;
	struct churner churners[2];
	unsigned long long received = 0, lost = 0, records = 0, per_cpu_cr = 0;
	unsigned long long per_cpu_lost = 0, tiny_lost = 0;
	bool cpu_wide_ok = true;
	struct timespec t0, t1;
	long taint0;
	pid_t child;
	int i, c, err, status;
	char name[64];

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			nthreads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--count") && i + 1 < argc)
			count = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else {
			fprintf(stderr, "usage: load [--threads N] [--count C] [--seed S]\n");
			return 2;
		}
	}
	if (nthreads < 1 || nthreads > MAX_THREADS || count < 1) {
		fprintf(stderr, "load: 1..%d threads, count >= 1\n", MAX_THREADS);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	pg = sysconf(_SC_PAGESIZE);
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu > MAX_CPUS)
		ncpu = MAX_CPUS;
	init_names();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	taint0 = read_tainted();

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 2;
	sh->pid = getpid();
	printf("debug/load: %d threads x %d loads and unloads, seed %llu\n", nthreads,
	       count, seed);

	/* The main thread's region, for the flush of the inherited recorders. */
	{
		unsigned char *code = mmap(NULL, pg, PROT_READ | PROT_WRITE,
					   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		memset(code, 0xc3, pg);
		mprotect(code, pg, PROT_READ | PROT_EXEC);
		sh->addrs[MAIN] = (uintptr_t)code;
		sh->tids[MAIN] = getpid();
	}

	/* CPU-wide events need CAP_PERFMON or perf_event_paranoid < 1. */
	{
		struct rec probe;

		err = rec_open(&probe, "probe", false, -1, 0, -1, 1);
		if (err == -EACCES || err == -EPERM) {
			cpu_wide_ok = false;
			printf("  no CPU-wide recorders: %s\n", strerror(-err));
		} else if (err) {
			failf("cannot open a CPU-wide mmap3 recorder: %s", strerror(-err));
			return 1;
		} else {
			rec_close(&probe);
		}
	}

	child = fork();
	if (child < 0)
		return 2;
	if (child == 0)
		recorder_process(cpu_wide_ok);

	/* Inherited per-CPU recorders: every thread made from here on. */
	for (c = 0; c < ncpu; c++) {
		err = rec_open(&cpu_big[c], "inherited big", true, 0, c, -1, 64);
		if (!err)
			err = rec_open(&cpu_tiny[c], "inherited tiny", true, 0, c, -1, 1);
		if (err) {
			failf("inherited recorder on cpu %d: %s", c, strerror(-err));
			return 1;
		}
		n_cpu_recs++;
	}

	pthread_barrier_init(&ready_bar, NULL, nthreads + 1);
	pthread_barrier_init(&start_bar, NULL, nthreads + 1);
	pthread_barrier_init(&done_bar, NULL, nthreads + 1);
	pthread_barrier_init(&flush_bar, NULL, nthreads + 1);
	pthread_barrier_init(&flushed_bar, NULL, nthreads + 1);
	for (i = 0; i < nthreads; i++)
		if (pthread_create(&threads[i], NULL, announcer, (void *)(long)i))
			return 2;
	pthread_barrier_wait(&ready_bar);

	/* Per-thread recorders of every fourth thread, thread 0's tiny. */
	for (i = 0; i < nthreads; i += 4) {
		struct rec *r = &per_thread[n_per_thread];

		snprintf(name, sizeof(name), "thread %d", i);
		err = rec_open(r, "per-thread", false, sh->tids[i], -1, i, i ? 2 << (i / 4 % 3) : 1);
		if (err) {
			failf("per-thread recorder of thread %d: %s", i, strerror(-err));
			return 1;
		}
		n_per_thread++;
	}

	pthread_create(&fast, NULL, fast_drainer, NULL);
	pthread_create(&slow, NULL, slow_drainer, NULL);
	for (i = 0; i < 2; i++) {
		memset(&churners[i], 0, sizeof(churners[i]));
		churners[i].seed = seed * 31 + i;
		churners[i].cpu_wide_ok = cpu_wide_ok;
		pthread_create(&churners[i].th, NULL, churn_thread, &churners[i]);
	}
	atomic_store(&sh->phase, 1);
	pthread_barrier_wait(&start_bar);

	/* The announcers run; then they wait for the flush. */
	pthread_barrier_wait(&done_bar);
	atomic_store(&stop_churn, 1);
	atomic_store(&sh->phase, 2);
	for (i = 0; i < 2; i++)
		pthread_join(churners[i].th, NULL);
	atomic_store(&stop_drain, 1);
	pthread_join(fast, NULL);
	pthread_join(slow, NULL);
	for (i = 0; i < n_per_thread; i++)
		rec_drain(&per_thread[i]);
	pthread_barrier_wait(&flush_bar);
	pthread_barrier_wait(&flushed_bar);
	for (i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);

	/* The flush of the inherited recorders, from the main thread on each CPU. */
	for (c = 0; c < n_cpu_recs; c++) {
		cpu_set_t set;

		rec_drain(&cpu_big[c]);
		rec_drain(&cpu_tiny[c]);
		CPU_ZERO(&set);
		CPU_SET(c, &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			failf("sched_setaffinity(%d): %s", c, strerror(errno));
		if (announce(MAIN, 2ULL * count, false) < 0)
			failf("flush announce on cpu %d: %s", c, strerror(errno));
	}

	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		failf("recorder process: status %#x: %s", status, sh->child_err);

	if (atomic_load(&failed))
		failf("%s", announce_err);
	if (atomic_load(&announces_total) != 2ULL * nthreads * count)
		failf("%llu announces made, %llu expected",
		      (unsigned long long)atomic_load(&announces_total),
		      2ULL * nthreads * count);

	/* Per-thread recorders: all of the thread's announces. */
	for (i = 0; i < n_per_thread; i++) {
		struct rec *r = &per_thread[i];
		int t = r->target, j;

		rec_drain(r);
		snprintf(name, sizeof(name), "per-thread recorder of thread %d (%zu pages)", t,
			 r->data_size / pg);
		report(r, name, 2ULL * count);
		for (j = 0; j <= MAX_THREADS; j++)
			if (j != t && r->cr_of[j])
				failf("%s: %llu code regions of thread %d", name,
				      (unsigned long long)r->cr_of[j], j);
		if (r->data_size == (size_t)pg)
			tiny_lost += r->chk.lost;
		received += r->cr;
		lost += r->chk.lost;
		records += r->chk.records;
		rec_close(r);
	}
	/* Inherited per-CPU recorders: together, all announces. */
	for (c = 0; c < n_cpu_recs; c++) {
		struct rec *rs[2] = { &cpu_big[c], &cpu_tiny[c] };
		int k;

		for (k = 0; k < 2; k++) {
			struct rec *r = rs[k];

			rec_drain(r);
			snprintf(name, sizeof(name), "%s recorder of cpu %d (%zu pages)", r->kind,
				 c, r->data_size / pg);
			report(r, name, 0);
			if (r->data_size == (size_t)pg)
				tiny_lost += r->chk.lost;
			received += r->cr;
			lost += r->chk.lost;
			records += r->chk.records;
		}
	}
	for (c = 0; c < n_cpu_recs; c++) {
		per_cpu_cr += cpu_big[c].cr;
		per_cpu_lost += cpu_big[c].chk.lost;
	}
	if (per_cpu_cr > 2ULL * nthreads * count ||
	    per_cpu_cr + per_cpu_lost < 2ULL * nthreads * count)
		failf("inherited big recorders: %llu code regions received, %llu lost, of %llu",
		      per_cpu_cr, per_cpu_lost, 2ULL * nthreads * count);
	per_cpu_cr = per_cpu_lost = 0;
	for (c = 0; c < n_cpu_recs; c++) {
		per_cpu_cr += cpu_tiny[c].cr;
		per_cpu_lost += cpu_tiny[c].chk.lost;
	}
	if (per_cpu_cr > 2ULL * nthreads * count ||
	    per_cpu_cr + per_cpu_lost < 2ULL * nthreads * count)
		failf("inherited tiny recorders: %llu code regions received, %llu lost, of %llu",
		      per_cpu_cr, per_cpu_lost, 2ULL * nthreads * count);
	for (c = 0; c < n_cpu_recs; c++) {
		rec_close(&cpu_big[c]);
		rec_close(&cpu_tiny[c]);
	}

	for (i = 0; i < 2; i++) {
		struct churn_stats *st = &churners[i].st;

		printf("  recorder thread %d: %llu recorders started and stopped, %llu records, "
		       "%llu code regions, %llu lost\n", i, (unsigned long long)st->opens,
		       (unsigned long long)st->records, (unsigned long long)st->cr,
		       (unsigned long long)st->lost);
		if (st->err[0])
			failf("recorder thread %d: %s", i, st->err);
		received += st->cr;
		lost += st->lost;
		records += st->records;
	}
	printf("  recorder process: %llu recorders started and stopped, %llu records, "
	       "%llu code regions, %llu lost\n", (unsigned long long)sh->child_opens,
	       (unsigned long long)sh->child_records, (unsigned long long)sh->child_cr,
	       (unsigned long long)sh->child_lost);
	received += sh->child_cr;
	lost += sh->child_lost;
	records += sh->child_records;

	printf("  announces: %llu; code regions received %llu\n",
	       (unsigned long long)atomic_load(&announces_total), received);
	if (!tiny_lost)
		failf("no tiny recorder lost a record");
	if (read_tainted() != taint0)
		failf("/proc/sys/kernel/tainted changed from %ld to %ld", taint0,
		      read_tainted());
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("  %.1f s\n", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	if (fails)
		return 1;
	printf("PASS debug/load: %d threads, %llu records, %llu lost (reported in "
	       "PERF_RECORD_LOST)\n", nthreads, records, lost);
	return 0;
}
