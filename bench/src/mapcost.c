// SPDX-License-Identifier: GPL-2.0
/*
 * mapcost: what recording mapping records costs the process that maps.
 *
 *   mapcost cost [--file ELF] [--lib SO] [--iters N] [--dl-iters N]
 *                [--rounds R] [--batch K] [--modes LIST] [--out CSV]
 *	mmap()+munmap() of @ELF (PROT_READ|PROT_EXEC, MAP_PRIVATE) and
 *	dlopen()+dlclose() of @SO, N times each, while this process itself
 *	records with a PERF_COUNT_SW_DUMMY event (pid 0, cpu -1,
 *	sample_id_all) of the given mode: none, mmap, mmap2, mmap2bid
 *	(mmap2 + build_id) or mmap3. The modes run interleaved, R rounds,
 *	each round starting with the next mode.
 *	The ring buffer (256 pages) is drained every K calls, outside the
 *	timed batches. CSV: round,mode,op,iters,ns_per_call,records,with_build_id,lost
 *
 *   mapcost buildid [--dir DIR] [--count N] [--modes LIST] [--out CSV]
 *	Picks N distinct ELF files with a build-id from DIR that this process
 *	has not mapped, then per mode drops the page cache (echo 3 >
 *	/proc/sys/vm/drop_caches; root) and maps each file once. Counts the
 *	records that carry the file's build-id. A last "warm" pass of
 *	mmap2bid runs without a drop. CSV:
 *	mode,cache,files,records,with_build_id,correct,build_id_err,lost
 *	--no-drop skips the drops (to try it out on a shared machine).
 *
 *   mapcost loop [--file ELF] [--iters N]
 *	Only the mmap()+munmap() loop, for perf record to record.
 *
 * A mode the kernel rejects (mmap3 on a kernel without MMAP3) is reported
 * on stderr and skipped. Exit status 0 unless something broke.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* Not in the host's uapi headers: PERF_RECORD_MMAP3 (the patched 6.12). */
#define REC_MMAP3 23
#define MMAP3_FIXED_SIZE_OFF 76	/* u16: where build_id[] starts (80) */
#define MMAP3_FLAGS_OFF 72
#define MMAP3_BID_SIZE_OFF 74
#define MMAP3_BUILD_ID_ERR (1u << 2)
#define MMAP3_BUILD_ID_PENDING (1u << 3)
#define MMAP3_ID_OFF 40		/* u32 maj, min; u64 ino, ino_generation */
/* PERF_RECORD_MMAP3_BUILD_ID: the build-id of a pending MMAP3's file. */
#define REC_MMAP3_BUILD_ID 24
#define BID_ID_OFF 16		/* u32 maj, min; u64 ino, ino_generation */
#define BID_FLAGS_OFF 40
#define BID_SIZE_OFF 42
#define BID_FIXED_SIZE_OFF 44
#ifndef PERF_RECORD_MISC_MMAP_BUILD_ID
#define PERF_RECORD_MISC_MMAP_BUILD_ID (1 << 14)
#endif

#define RB_PAGES 256
#define MAX_FILES 256

enum mode { M_NONE, M_MMAP, M_MMAP2, M_MMAP2BID, M_MMAP3, NR_MODES };
static const char *const mode_names[NR_MODES] = { "none", "mmap", "mmap2", "mmap2bid", "mmap3" };

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* ---- the recording event ---- */

struct recorder {
	int fd;
	void *base;
	size_t size;		/* data area */
	size_t page;
	int mode;
	/* what the drains saw */
	uint64_t records;	/* mapping records of the mode's type */
	uint64_t with_bid;	/* of which carry a build-id */
	uint64_t bid_err;	/* MMAP3 with PERF_MMAP3_BUILD_ID_ERR */
	uint64_t lost;
	/* for buildid: the file to look for and its build-id */
	const char *want_name;
	const uint8_t *want_bid;
	size_t want_bid_size;
	uint64_t want_seen, want_has_bid, want_correct, want_err;
	/* the file identity of the wanted file's pending MMAP3 record */
	unsigned char want_id[24];
	bool want_pending;
};

static int rec_open(struct recorder *r, int mode)
{
	struct perf_event_attr attr;

	memset(r, 0, sizeof(*r));
	r->fd = -1;
	r->mode = mode;
	if (mode == M_NONE)
		return 0;
	bench_attr_init(&attr);
	switch (mode) {
	case M_MMAP:
		attr.mmap = 1;
		break;
	/*
	 * mmap2 with mmap, as perf sets them: the kernel counts mmap events
	 * (nr_mmap_events) by attr.mmap, and skips the work without one.
	 */
	case M_MMAP2:
		attr.mmap = 1;
		attr.mmap2 = 1;
		break;
	case M_MMAP2BID:
		attr.mmap = 1;
		attr.mmap2 = 1;
		attr.build_id = 1;
		break;
	case M_MMAP3:
		bench_attr_set(&attr, BENCH_ATTR_BIT_MMAP3);
		break;
	}
	r->fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (r->fd < 0)
		return -errno;
	r->page = (size_t)sysconf(_SC_PAGESIZE);
	r->size = RB_PAGES * r->page;
	r->base = mmap(NULL, r->size + r->page, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->base == MAP_FAILED) {
		int err = -errno;

		close(r->fd);
		r->fd = -1;
		return err;
	}
	return 0;
}

/* One record, contiguous. */
static void rec_one(struct recorder *r, const unsigned char *p, size_t len)
{
	struct perf_event_header h;
	const char *name = NULL;
	const uint8_t *bid = NULL;
	size_t bid_size = 0;
	bool err = false, mine = false;

	memcpy(&h, p, sizeof(h));
	if (h.type == PERF_RECORD_LOST) {
		uint64_t n;

		memcpy(&n, p + 16, sizeof(n));
		r->lost += n;
		return;
	}
	switch (h.type) {
	case PERF_RECORD_MMAP:
		mine = r->mode == M_MMAP;
		name = (const char *)p + 40;
		break;
	case PERF_RECORD_MMAP2:
		mine = r->mode == M_MMAP2 || r->mode == M_MMAP2BID;
		name = (const char *)p + 72;
		if (h.misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
			bid_size = p[40];
			bid = p + 44;
		}
		break;
	case REC_MMAP3_BUILD_ID: {
		uint16_t fl, fixed;

		if (r->mode != M_MMAP3 || len < 48)
			return;
		memcpy(&fl, p + BID_FLAGS_OFF, sizeof(fl));
		memcpy(&fixed, p + BID_FIXED_SIZE_OFF, sizeof(fixed));
		bid_size = p[BID_SIZE_OFF];
		if (fixed + ((bid_size + 7) & ~7u) > len)
			return;
		/* The build-id of a file whose mapping said it was pending. */
		r->with_bid += bid_size > 0;
		r->bid_err += !!(fl & MMAP3_BUILD_ID_ERR);
		if (!r->want_pending || memcmp(p + BID_ID_OFF, r->want_id, sizeof(r->want_id)))
			return;
		r->want_pending = false;
		r->want_has_bid += bid_size > 0;
		r->want_err += !!(fl & MMAP3_BUILD_ID_ERR);
		if (bid_size && bid_size == r->want_bid_size &&
		    !memcmp(p + fixed, r->want_bid, bid_size))
			r->want_correct++;
		return;
	}
	case REC_MMAP3: {
		uint16_t fl, fixed;

		mine = r->mode == M_MMAP3;
		memcpy(&fl, p + MMAP3_FLAGS_OFF, sizeof(fl));
		memcpy(&fixed, p + MMAP3_FIXED_SIZE_OFF, sizeof(fixed));
		bid_size = p[MMAP3_BID_SIZE_OFF];
		bid = bid_size ? p + fixed : NULL;
		err = fl & MMAP3_BUILD_ID_ERR;
		name = (const char *)p + fixed + ((bid_size + 7) & ~7u);
		break;
	}
	default:
		return;
	}
	if (!mine || (const unsigned char *)name >= p + len ||
	    !memchr(name, 0, len - (size_t)((const unsigned char *)name - p)))
		return;
	r->records++;
	r->with_bid += bid_size > 0;
	r->bid_err += err;
	if (r->want_name && !strcmp(name, r->want_name)) {
		if (h.type == REC_MMAP3 && !bid_size && !err &&
		    (p[MMAP3_FLAGS_OFF] & MMAP3_BUILD_ID_PENDING)) {
			memcpy(r->want_id, p + MMAP3_ID_OFF, sizeof(r->want_id));
			r->want_pending = true;
		}
		r->want_seen++;
		r->want_has_bid += bid_size > 0;
		r->want_err += err;
		if (bid_size && bid_size == r->want_bid_size && !memcmp(bid, r->want_bid, bid_size))
			r->want_correct++;
	}
}

static void rec_drain(struct recorder *r)
{
	struct perf_event_mmap_page *pg = r->base;
	const unsigned char *data;
	uint64_t head, tail;
	unsigned char tmp[8192];

	if (r->fd < 0)
		return;
	data = (const unsigned char *)r->base + r->page;
	head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	tail = pg->data_tail;
	while (tail < head) {
		struct perf_event_header h;
		size_t off = tail % r->size;
		const unsigned char *p;

		if (off + sizeof(h) <= r->size) {
			memcpy(&h, data + off, sizeof(h));
		} else {
			size_t first = r->size - off;

			memcpy(&h, data + off, first);
			memcpy((char *)&h + first, data, sizeof(h) - first);
		}
		if (h.size < sizeof(h) || tail + h.size > head)
			break;
		if (off + h.size <= r->size) {
			p = data + off;
		} else {
			size_t first = r->size - off;

			if (h.size > sizeof(tmp))
				goto skip;
			memcpy(tmp, data + off, first);
			memcpy(tmp + first, data, h.size - first);
			p = tmp;
		}
		rec_one(r, p, h.size);
skip:
		tail += h.size;
	}
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
}

static void rec_close(struct recorder *r)
{
	if (r->fd < 0)
		return;
	rec_drain(r);
	munmap(r->base, r->size + r->page);
	close(r->fd);
	r->fd = -1;
}

/* ---- options ---- */

struct opts {
	const char *file;
	const char *lib;
	const char *dir;
	const char *out;
	long iters, dl_iters, rounds, batch, count;
	bool no_drop;
	bool modes[NR_MODES];
};

static void parse_modes(struct opts *o, const char *list)
{
	char *copy = strdup(list), *save = NULL, *tok;

	memset(o->modes, 0, sizeof(o->modes));
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int m;

		for (m = 0; m < NR_MODES; m++)
			if (!strcmp(tok, mode_names[m]))
				break;
		if (m == NR_MODES) {
			fprintf(stderr, "mapcost: unknown mode %s\n", tok);
			exit(2);
		}
		o->modes[m] = true;
	}
	free(copy);
}

static long num(const char *opt, const char *v)
{
	char *end;
	long n = strtol(v, &end, 10);

	if (!*v || *end || n < 0) {
		fprintf(stderr, "mapcost: %s: bad number %s\n", opt, v);
		exit(2);
	}
	return n;
}

static void parse(struct opts *o, int argc, char **argv)
{
	o->file = "/usr/lib/x86_64-linux-gnu/libc.so.6";
	o->lib = NULL;
	o->dir = "/usr/lib/x86_64-linux-gnu";
	o->out = NULL;
	o->iters = 10000;
	o->dl_iters = 1000;
	o->rounds = 5;
	o->batch = 500;
	o->count = 50;
	for (int m = 0; m < NR_MODES; m++)
		o->modes[m] = true;
	o->no_drop = false;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--no-drop")) {
			o->no_drop = true;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "mapcost: %s: missing value\n", a);
			exit(2);
		}
		const char *v = argv[++i];

		if (!strcmp(a, "--file"))
			o->file = v;
		else if (!strcmp(a, "--lib"))
			o->lib = v;
		else if (!strcmp(a, "--dir"))
			o->dir = v;
		else if (!strcmp(a, "--out"))
			o->out = v;
		else if (!strcmp(a, "--iters"))
			o->iters = num(a, v);
		else if (!strcmp(a, "--dl-iters"))
			o->dl_iters = num(a, v);
		else if (!strcmp(a, "--rounds"))
			o->rounds = num(a, v);
		else if (!strcmp(a, "--batch"))
			o->batch = num(a, v);
		else if (!strcmp(a, "--count"))
			o->count = num(a, v);
		else if (!strcmp(a, "--modes"))
			parse_modes(o, v);
		else {
			fprintf(stderr, "mapcost: unknown option %s\n", a);
			exit(2);
		}
	}
	if (o->batch < 1)
		o->batch = 1;
}

static FILE *open_out(const struct opts *o)
{
	FILE *f;

	if (!o->out)
		return stdout;
	f = fopen(o->out, "w");
	if (!f)
		die(o->out);
	return f;
}

/* ---- cost ---- */

static int map_fd = -1;
static size_t map_len;

static void map_once(void)
{
	void *p = mmap(NULL, map_len, PROT_READ | PROT_EXEC, MAP_PRIVATE, map_fd, 0);

	if (p == MAP_FAILED)
		die("mmap");
	if (munmap(p, map_len))
		die("munmap");
}

static const char *dl_path;

static void dl_once(void)
{
	void *h = dlopen(dl_path, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		fprintf(stderr, "mapcost: dlopen: %s\n", dlerror());
		exit(1);
	}
	if (dlclose(h)) {
		fprintf(stderr, "mapcost: dlclose: %s\n", dlerror());
		exit(1);
	}
}

/* N calls of @fn in batches of @batch, draining between batches; ns/call. */
static double timed(struct recorder *r, void (*fn)(void), long n, long batch)
{
	uint64_t total = 0;

	for (long done = 0; done < n;) {
		long k = n - done < batch ? n - done : batch;
		uint64_t t0 = bench_now_ns();

		for (long i = 0; i < k; i++)
			fn();
		total += bench_now_ns() - t0;
		done += k;
		rec_drain(r);
	}
	return n ? (double)total / (double)n : 0;
}

static int open_map_file(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		die(path);
	if (fstat(fd, &st))
		die("fstat");
	map_len = (size_t)st.st_size;
	if (map_len > (1u << 20))
		map_len = 1u << 20;
	return fd;
}

static int cmd_cost(const struct opts *o)
{
	FILE *out = open_out(o);
	bool ok[NR_MODES];

	map_fd = open_map_file(o->file);
	dl_path = o->lib;
	/* Probe the modes; warm up (page cache, ld.so caches). */
	for (int m = 0; m < NR_MODES; m++) {
		struct recorder r;
		int err;

		ok[m] = false;
		if (!o->modes[m])
			continue;
		err = rec_open(&r, m);
		if (err) {
			fprintf(stderr, "mapcost: mode %s unsupported here: %s\n", mode_names[m],
				strerror(-err));
			continue;
		}
		ok[m] = true;
		timed(&r, map_once, o->batch, o->batch);
		if (dl_path)
			timed(&r, dl_once, o->batch / 10 + 1, o->batch);
		rec_close(&r);
	}
	fprintf(out, "round,mode,op,iters,ns_per_call,records,with_build_id,lost\n");
	for (long round = 1; round <= o->rounds; round++) {
		/*
		 * Each round starts with another mode: a drift in the guest's
		 * speed (the host is shared) must not always fall on the same
		 * mode.
		 */
		for (int k = 0; k < NR_MODES; k++) {
			int m = (k + round) % NR_MODES;
			struct recorder r;
			double ns;

			if (!ok[m])
				continue;
			if (rec_open(&r, m))
				die("perf_event_open");
			ns = timed(&r, map_once, o->iters, o->batch);
			rec_drain(&r);
			fprintf(out, "%ld,%s,mmap,%ld,%.1f,%llu,%llu,%llu\n", round, mode_names[m],
				o->iters, ns, (unsigned long long)r.records,
				(unsigned long long)r.with_bid, (unsigned long long)r.lost);
			rec_close(&r);
			if (!dl_path || !o->dl_iters)
				continue;
			if (rec_open(&r, m))
				die("perf_event_open");
			ns = timed(&r, dl_once, o->dl_iters, o->batch);
			rec_drain(&r);
			fprintf(out, "%ld,%s,dlopen,%ld,%.1f,%llu,%llu,%llu\n", round, mode_names[m],
				o->dl_iters, ns, (unsigned long long)r.records,
				(unsigned long long)r.with_bid, (unsigned long long)r.lost);
			rec_close(&r);
		}
		fflush(out);
	}
	if (out != stdout)
		fclose(out);
	return 0;
}

/* ---- buildid ---- */

struct elf_file {
	char *path;
	uint8_t bid[20];
	size_t bid_size;
	size_t len;
};

/* The GNU build-id of an ELF64 file, by its program headers; 0 if none. */
static size_t read_build_id(int fd, uint8_t bid[20])
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;

	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(ph))
		return 0;
	for (int i = 0; i < eh.e_phnum; i++) {
		unsigned char buf[4096];
		size_t off = 0, n;

		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * sizeof(ph))) != sizeof(ph))
			return 0;
		if (ph.p_type != PT_NOTE)
			continue;
		n = ph.p_filesz < sizeof(buf) ? ph.p_filesz : sizeof(buf);
		if (pread(fd, buf, n, (off_t)ph.p_offset) != (ssize_t)n)
			continue;
		while (off + sizeof(Elf64_Nhdr) <= n) {
			Elf64_Nhdr nh;
			size_t desc;

			memcpy(&nh, buf + off, sizeof(nh));
			desc = off + sizeof(nh) + ((nh.n_namesz + 3) & ~3u);
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp(buf + off + sizeof(nh), "GNU", 4) && nh.n_descsz <= 20 &&
			    desc + nh.n_descsz <= n) {
				memcpy(bid, buf + desc, nh.n_descsz);
				return nh.n_descsz;
			}
			off = desc + ((nh.n_descsz + 3) & ~3u);
		}
	}
	return 0;
}

/* Whether this process maps the inode (then the drop cannot evict it). */
static bool mapped_by_self(dev_t dev, ino_t ino)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4096];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		unsigned long long inode;

		if (sscanf(line, "%*x-%*x %*s %*x %x:%x %llu", &maj, &min, &inode) == 3 &&
		    inode == (unsigned long long)ino && makedev(maj, min) == dev)
			found = true;
	}
	fclose(f);
	return found;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int pick_files(const struct opts *o, struct elf_file *files)
{
	DIR *d = opendir(o->dir);
	struct dirent *de;
	char **names = NULL;
	size_t nnames = 0, cap = 0;
	ino_t seen[MAX_FILES];
	int n = 0;

	if (!d)
		die(o->dir);
	while ((de = readdir(d))) {
		if (!strstr(de->d_name, ".so"))
			continue;
		if (nnames == cap) {
			cap = cap ? cap * 2 : 256;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				die("realloc");
		}
		names[nnames++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, nnames, sizeof(*names), cmp_str);
	for (size_t i = 0; i < nnames && n < o->count && n < MAX_FILES; i++) {
		char path[4096];
		struct stat st;
		struct elf_file *f = &files[n];
		bool dup = false;
		int fd;

		snprintf(path, sizeof(path), "%s/%s", o->dir, names[i]);
		if (lstat(path, &st) || !S_ISREG(st.st_mode) || st.st_size < 4096)
			continue;
		for (int j = 0; j < n; j++)
			dup |= seen[j] == st.st_ino;
		if (dup || mapped_by_self(st.st_dev, st.st_ino))
			continue;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		f->bid_size = read_build_id(fd, f->bid);
		close(fd);
		if (!f->bid_size)
			continue;
		f->path = realpath(path, NULL);
		if (!f->path)
			continue;
		f->len = (size_t)st.st_size < 65536 ? (size_t)st.st_size : 65536;
		seen[n++] = st.st_ino;
	}
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	return n;
}

static int drop_caches(void)
{
	int fd;

	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, "3\n", 2) != 2) {
		int err = -errno;

		close(fd);
		return err;
	}
	close(fd);
	return 0;
}

static void buildid_pass(FILE *out, struct elf_file *files, int n, int mode, bool drop)
{
	struct recorder r;
	uint64_t has = 0, correct = 0, err = 0, seen = 0;
	int e;

	if (drop) {
		e = drop_caches();
		if (e) {
			fprintf(stderr, "mapcost: drop_caches: %s (not root?); reporting as no-drop\n",
				strerror(-e));
			drop = false;
		}
	}
	e = rec_open(&r, mode);
	if (e) {
		fprintf(stderr, "mapcost: mode %s unsupported here: %s\n", mode_names[mode], strerror(-e));
		return;
	}
	for (int i = 0; i < n; i++) {
		int fd = open(files[i].path, O_RDONLY | O_CLOEXEC);
		void *p;

		if (fd < 0)
			die(files[i].path);
		r.want_name = files[i].path;
		r.want_bid = files[i].bid;
		r.want_bid_size = files[i].bid_size;
		r.want_seen = r.want_has_bid = r.want_correct = r.want_err = 0;
		p = mmap(NULL, files[i].len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED)
			die("mmap");
		munmap(p, files[i].len);
		close(fd);
		rec_drain(&r);
		/*
		 * A pending build-id comes from the kernel's worker after
		 * mmap() returned: wait up to 5 s for it, as a tool reading
		 * the whole recording would have it.
		 */
		for (int t = 0; t < 500 && r.want_pending; t++) {
			usleep(10000);
			rec_drain(&r);
		}
		seen += r.want_seen > 0;
		has += r.want_has_bid > 0;
		correct += r.want_correct > 0;
		err += r.want_err > 0;
		r.want_name = NULL;
	}
	rec_drain(&r);
	fprintf(out, "%s,%s,%d,%llu,%llu,%llu,%llu,%llu\n", mode_names[mode], drop ? "dropped" : "warm", n,
		(unsigned long long)seen, (unsigned long long)has, (unsigned long long)correct,
		(unsigned long long)err, (unsigned long long)r.lost);
	fflush(out);
	rec_close(&r);
}

static int cmd_buildid(const struct opts *o)
{
	static struct elf_file files[MAX_FILES];
	FILE *out = open_out(o);
	int n = pick_files(o, files);

	fprintf(stderr, "mapcost: %d ELF files with a build-id from %s\n", n, o->dir);
	fprintf(out, "mode,cache,files,records,with_build_id,correct,build_id_err,lost\n");
	for (int m = M_MMAP2BID; m < NR_MODES; m++)
		if (o->modes[m])
			buildid_pass(out, files, n, m, !o->no_drop);
	/* Now the notes are cached (if a pass above read them): best effort works. */
	if (o->modes[M_MMAP2BID] && !o->no_drop)
		buildid_pass(out, files, n, M_MMAP2BID, false);
	if (out != stdout)
		fclose(out);
	return 0;
}

/* ---- loop ---- */

static int cmd_loop(const struct opts *o)
{
	uint64_t t0;

	map_fd = open_map_file(o->file);
	t0 = bench_now_ns();
	for (long i = 0; i < o->iters; i++)
		map_once();
	fprintf(stderr, "mapcost: %ld mmap+munmap of %s in %.3f s\n", o->iters, o->file,
		(double)(bench_now_ns() - t0) / 1e9);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;

	if (argc < 2) {
		fprintf(stderr, "usage: mapcost cost|buildid|loop [options] (see the source)\n");
		return 2;
	}
	parse(&o, argc, argv);
	if (!strcmp(argv[1], "cost"))
		return cmd_cost(&o);
	if (!strcmp(argv[1], "buildid"))
		return cmd_buildid(&o);
	if (!strcmp(argv[1], "loop"))
		return cmd_loop(&o);
	fprintf(stderr, "mapcost: unknown command %s\n", argv[1]);
	return 2;
}
