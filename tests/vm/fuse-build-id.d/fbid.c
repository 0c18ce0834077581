// SPDX-License-Identifier: GPL-2.0
/*
 * fbid: the programs of tests/vm/fuse-build-id, which checks that a
 * PERF_RECORD_MMAP3 for an ELF file on FUSE never makes mmap() wait for the
 * FUSE server, and still says honestly what it knows; tests/vm/suspended-device
 * uses `fbid map` on a block device that stops answering.
 *
 *   fbid serve SRCDIR MNT [--self-map NAME]...
 *	A read-only passthrough FUSE daemon (libfuse3, low-level API) of the
 *	flat directory SRCDIR, mounted at MNT, served by ONE thread: the main
 *	thread runs fuse_session_loop() and nothing else reads /dev/fuse. It
 *	prints "ready" once the mount is up (and, with --self-map, once its
 *	files are open).
 *
 *	With --self-map, the daemon maps files of its own mount from inside a
 *	request handler, so that only the thread that maps could answer the
 *	READ a build-id read would send. Before the trigger, a helper thread
 *	opens MNT/NAME for each NAME (the loop thread answers the LOOKUP and
 *	OPEN) and then only waits; it never serves requests. A LOOKUP of
 *	"trigger" in the root (`stat MNT/trigger` from outside) makes the loop
 *	thread, inside its lookup handler, mmap() each file PROT_READ|PROT_EXEC
 *	while a perf event with mmap3 watches it, and print the MMAP3 record it
 *	got ("result NAME: ..."). A kernel that reads a note that is not cached
 *	on the task's way back from mmap() waits there forever: the trigger
 *	then never returns. After the trigger the helper thread closes the
 *	files (the loop answers FLUSH and RELEASE) and prints "closed".
 *
 *   fbid map FILE [--read-first | --cpu CPU | --count N]
 *	Watches itself with a perf event with mmap3, opens FILE, prints
 *	"opened", waits for a line (or end of file) on standard input, then
 *	drops FILE's page cache (POSIX_FADV_DONTNEED), mmap()s it
 *	PROT_READ|PROT_EXEC and prints the record it got: "record FILE: ..."
 *	once mmap() has returned, then "result FILE: ...", which for a
 *	pending build-id waits for the build-id record.
 *	With --read-first it reads the whole file after opening it, and drops
 *	nothing, so that the note is in the page cache. It then waits for end
 *	of file on standard input before it unmaps and closes FILE (closing a
 *	file on FUSE waits for the server's answer to FLUSH).
 *	With --cpu, the event is CPU CPU's (every task there; needs the
 *	rights for that) and the mapper runs on that CPU only.
 *	With --count, it maps FILE N times, unmapping each mapping before
 *	the next, and prints "records FILE: N mappings, P pending, E err,
 *	O other" once the last mmap() has returned, then "results FILE: B
 *	build-id records, all HEX" (or "... differ ...") once the P build-id
 *	records of the file have come, or 120 s have passed.
 *
 * The result line, one per mapping:
 *   result NAME: err                   PERF_MMAP3_BUILD_ID_ERR, no build-id
 *   result NAME: none                  no build-id, no error flag
 *   result NAME: build-id HEX          the build-id the record carries
 *   result NAME: pending, then X       PERF_MMAP3_BUILD_ID_PENDING, and X
 *                                      (build-id HEX, err or none) from the
 *                                      PERF_RECORD_MMAP3_BUILD_ID of the file
 *   result NAME: missing ...           no MMAP3 record for the mapping
 *   result NAME: bad ...               a record with a wrong field
 *   result NAME: error ...             the test itself could not run
 * The driver decides which of the first three each case expects.
 *
 * The record is read with the layout of the series' uapi header: the fixed
 * part, then build_id[] at offset fixed_size (the u16 at offset 76), then
 * the file name. Kernels from before fixed_size was added have 0 there
 * (a reserved field) and a fixed part of 80 bytes: 0 is read as 80.
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 34

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include <fuse_lowlevel.h>
#include <linux/perf_event.h>

/* struct mmap3_fixed and struct mmap3_build_id_fixed, as the debug tests read them. */
#include "../../debug/mmap3-check.h"

/* ---- perf: one side-band event on the calling thread, and its records */

/*
 * 256 KB: map --count's 1,024 build-id records (96 bytes each) can come in
 * one burst when the device answers, and must all fit.
 */
#define RB_PAGES	64

#define SAMPLE_ID_SIZE	24	/* PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU */

struct rb {
	int		fd;
	unsigned char	*base;
	size_t		size;		/* of the data area */
	__u64		tail;
	unsigned char	rec[65536];	/* the last record read, unwrapped */
};

static struct rb rb = { .fd = -1 };

static int rb_open(int cpu)
{
	struct perf_event_attr attr = {
		.size		= sizeof(attr),
		.type		= PERF_TYPE_SOFTWARE,
		.config		= PERF_COUNT_SW_DUMMY,
		.sample_type	= PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU,
		.sample_id_all	= 1,
		.mmap3		= 1,
		.exclude_kernel	= 1,
		.exclude_hv	= 1,
	};
	long page = sysconf(_SC_PAGESIZE);

	/* pid 0, cpu -1: this thread only, on every CPU; or every task of @cpu. */
	rb.fd = syscall(__NR_perf_event_open, &attr, cpu < 0 ? 0 : -1, cpu, -1,
			PERF_FLAG_FD_CLOEXEC);
	if (rb.fd < 0)
		return -errno;
	rb.size = RB_PAGES * page;
	rb.base = mmap(NULL, rb.size + page, PROT_READ | PROT_WRITE, MAP_SHARED, rb.fd, 0);
	if (rb.base == MAP_FAILED)
		return -errno;
	return 0;
}

/* Copy the next record into rb.rec and return it, or NULL. */
static struct perf_event_header *rb_next(void)
{
	struct perf_event_mmap_page *pg = (void *)rb.base;
	unsigned char *data = rb.base + sysconf(_SC_PAGESIZE);
	__u64 head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	struct perf_event_header hdr;
	size_t i;

	if (rb.tail >= head)
		return NULL;
	for (i = 0; i < sizeof(hdr); i++)
		((unsigned char *)&hdr)[i] = data[(rb.tail + i) % rb.size];
	if (hdr.size < sizeof(hdr) || rb.tail + hdr.size > head)
		return NULL;
	for (i = 0; i < hdr.size; i++)
		rb.rec[i] = data[(rb.tail + i) % rb.size];
	rb.tail += hdr.size;
	__atomic_store_n(&pg->data_tail, rb.tail, __ATOMIC_RELEASE);
	return (struct perf_event_header *)rb.rec;
}

static int all_zero(const unsigned char *p, size_t n)
{
	while (n--)
		if (*p++)
			return 0;
	return 1;
}

/*
 * The result of a mapping whose record said PERF_MMAP3_BUILD_ID_PENDING:
 * the PERF_RECORD_MMAP3_BUILD_ID of the same file, which the kernel's
 * worker writes once it has read the note. Waits up to 120 s for it (a
 * device held for a test's sake answers within that).
 */
static void report_later(const char *name, __u32 maj, __u32 min, __u64 ino,
			 __u64 gen)
{
	const struct mmap3_build_id_fixed *b;
	struct perf_event_header *h;
	size_t fixed, i;
	int n = 0, tries = 0;

	while ((h = rb_next()) || (tries++ < 12000 && !usleep(10000))) {
		if (!h)
			continue;
		n++;
		b = (const void *)h;
		if (h->type != PERF_RECORD_MMAP3_BUILD_ID || b->maj != maj ||
		    b->min != min || b->ino != ino || b->ino_generation != gen)
			continue;
		fixed = b->fixed_size ? b->fixed_size : sizeof(*b);
		if (b->build_id_size > 20 || fixed < sizeof(*b) ||
		    h->size < fixed + b->build_id_size + SAMPLE_ID_SIZE) {
			printf("result %s: bad (build-id record of %u bytes, build_id_size %u)\n",
			       name, h->size, b->build_id_size);
			return;
		}
		/* The sample_id's CPU: the last 8 bytes, cpu then res. */
		printf("sample_id %s: cpu %u\n", name,
		       *(const __u32 *)((const char *)h + h->size - 8));
		if (b->build_id_size) {
			printf("result %s: pending, then build-id ", name);
			for (i = 0; i < b->build_id_size; i++)
				printf("%02x", ((const unsigned char *)b + fixed)[i]);
			printf("\n");
		} else {
			printf("result %s: pending, then %s\n", name,
			       b->mmap3_flags & PERF_MMAP3_BUILD_ID_ERR ? "err" : "none");
		}
		return;
	}
	printf("result %s: pending, then missing (no build-id record among %d records)\n",
	       name, n);
}

/*
 * Print the result line for the mapping of @path (opened as @st, absolute
 * name @real) at @addr: the MMAP3 record of this thread for it, read out of
 * the ring buffer, every field checked that the test can know.
 */
static void report(const char *name, void *addr, size_t len, const struct stat *st,
		   const char *real)
{
	const struct mmap3_fixed *r = NULL;
	struct perf_event_header *h;
	const unsigned char *bid;
	const char *file;
	size_t fixed, idsz, room, i;
	const __u32 *spid;
	size_t page = sysconf(_SC_PAGESIZE), pages = (len + page - 1) & ~(page - 1);
	int n = 0;

	while ((h = rb_next())) {
		n++;
		if (h->type == PERF_RECORD_MMAP3 &&
		    ((struct mmap3_fixed *)h)->addr == (unsigned long)addr) {
			r = (void *)h;
			break;
		}
	}
	if (!r) {
		printf("result %s: missing (no MMAP3 record at %p among %d records)\n",
		       name, addr, n);
		return;
	}
	fixed = r->fixed_size ? r->fixed_size : sizeof(*r);
	idsz = (r->build_id_size + 7) & ~7UL;
	printf("record %s: size %u fixed_size %u mmap3_flags %#x build_id_size %u\n",
	       name, r->header.size, r->fixed_size, r->mmap3_flags, r->build_id_size);
	if (fixed < sizeof(*r) || fixed % 8 ||
	    r->header.size < fixed + idsz + 8 + SAMPLE_ID_SIZE || r->header.size % 8) {
		printf("result %s: bad (record size %u, fixed part %zu, build-id %u)\n",
		       name, r->header.size, fixed, r->build_id_size);
		return;
	}
	bid = (const unsigned char *)r + fixed;
	file = (const char *)bid + idsz;
	room = r->header.size - fixed - idsz - SAMPLE_ID_SIZE;
	spid = (const __u32 *)((const char *)r + r->header.size - SAMPLE_ID_SIZE);
	if (!memchr(file, 0, room) || strcmp(file, real)) {
		printf("result %s: bad (file name '%.*s', not '%s')\n", name,
		       (int)strnlen(file, room), file, real);
	} else if (r->pid != (__u32)getpid() || r->tid != (__u32)gettid() ||
		   spid[0] != r->pid || spid[1] != r->tid) {
		printf("result %s: bad (pid/tid %u/%u, sample_id %u/%u, this thread %d/%d)\n",
		       name, r->pid, r->tid, spid[0], spid[1], getpid(), gettid());
	} else if (r->len != pages || r->pgoff != 0 || !(r->prot & PROT_EXEC)) {
		printf("result %s: bad (len %llu pgoff %llu prot %#x)\n", name,
		       (unsigned long long)r->len, (unsigned long long)r->pgoff, r->prot);
	} else if (r->maj != major(st->st_dev) || r->min != minor(st->st_dev) ||
		   r->ino != st->st_ino) {
		printf("result %s: bad (inode %u:%u %llu, the file is %u:%u %llu)\n", name,
		       r->maj, r->min, (unsigned long long)r->ino, major(st->st_dev),
		       minor(st->st_dev), (unsigned long long)st->st_ino);
	} else if (r->build_id_size > 20 || r->__reserved_1 ||
		   !all_zero(bid + r->build_id_size, idsz - r->build_id_size) ||
		   !all_zero((const unsigned char *)file + strlen(file), room - strlen(file))) {
		printf("result %s: bad (build_id_size %u, or non-zero padding)\n",
		       name, r->build_id_size);
	} else if (r->mmap3_flags == PERF_MMAP3_BUILD_ID_PENDING && !r->build_id_size) {
		report_later(name, r->maj, r->min, r->ino, r->ino_generation);
	} else if (r->mmap3_flags & ~PERF_MMAP3_BUILD_ID_ERR) {
		printf("result %s: bad (mmap3_flags %#x)\n", name, r->mmap3_flags);
	} else if (r->mmap3_flags & PERF_MMAP3_BUILD_ID_ERR) {
		if (r->build_id_size)
			printf("result %s: bad (BUILD_ID_ERR with a %u-byte build-id)\n",
			       name, r->build_id_size);
		else
			printf("result %s: err\n", name);
	} else if (!r->build_id_size) {
		printf("result %s: none\n", name);
	} else {
		printf("result %s: build-id ", name);
		for (i = 0; i < r->build_id_size; i++)
			printf("%02x", bid[i]);
		printf("\n");
	}
}

/* ---- the mapping, for both modes */

struct target {
	const char	*name;		/* as given */
	int		fd;
	struct stat	st;
	char		real[PATH_MAX];
};

/* Open @t->name; 0 or a message on standard output and -1. */
static int target_open(struct target *t, const char *path)
{
	t->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (t->fd < 0 || fstat(t->fd, &t->st) || !realpath(path, t->real)) {
		printf("result %s: error (open %s: %s)\n", t->name, path, strerror(errno));
		return -1;
	}
	return 0;
}

/* mmap() @t executable, report its record, unmap it. Touches no page. */
static void target_map(struct target *t)
{
	void *p = mmap(NULL, t->st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, t->fd, 0);

	if (p == MAP_FAILED) {
		printf("result %s: error (mmap: %s)\n", t->name, strerror(errno));
	} else {
		report(t->name, p, t->st.st_size, &t->st, t->real);
		munmap(p, t->st.st_size);
	}
	fflush(stdout);
}

/* ---- serve: the daemon */

#define TRIGGER		"trigger"
#define TRIGGER_INO	1000000
#define MAX_FILES	64
#define MAX_SELF	8

static int srcfd;
static char *names[MAX_FILES];		/* inode i + 2 is names[i] */
static int nnames;
static const char *mnt;

static struct target self[MAX_SELF];
static int nself;
static sem_t self_opened, self_done;
static int self_triggered;

static const char *ino_name(fuse_ino_t ino)
{
	return ino >= 2 && ino < 2 + (fuse_ino_t)nnames ? names[ino - 2] : NULL;
}

static int node_stat(fuse_ino_t ino, struct stat *st)
{
	const char *name = ino_name(ino);

	memset(st, 0, sizeof(*st));
	if (ino == FUSE_ROOT_ID) {
		if (fstat(srcfd, st))
			return errno;
	} else if (ino == TRIGGER_INO) {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
	} else if (!name) {
		return ENOENT;
	} else if (fstatat(srcfd, name, st, AT_SYMLINK_NOFOLLOW)) {
		return errno;
	}
	st->st_ino = ino;
	st->st_mode &= ~0222;
	return 0;
}

static void reply_entry(fuse_req_t req, fuse_ino_t ino)
{
	struct fuse_entry_param e = {
		.ino		= ino,
		.attr_timeout	= 3600,
		.entry_timeout	= 3600,
	};
	int err = node_stat(ino, &e.attr);

	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, &e);
}

/* The trigger: in this request handler, on the only thread that serves. */
static void self_map(void)
{
	int i;

	if (self_triggered++)
		return;
	printf("trigger\n");
	fflush(stdout);
	/* Posted before "ready"; waiting here would wait for ourselves. */
	if (sem_trywait(&self_opened)) {
		printf("result all: error (triggered before the files were open)\n");
		return;
	}
	for (i = 0; i < nself; i++)
		if (self[i].fd >= 0)
			target_map(&self[i]);
	sem_post(&self_done);
}

static void fbid_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int i;

	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (nself && !strcmp(name, TRIGGER)) {
		self_map();
		reply_entry(req, TRIGGER_INO);
		return;
	}
	for (i = 0; i < nnames; i++)
		if (!strcmp(names[i], name)) {
			reply_entry(req, i + 2);
			return;
		}
	fuse_reply_err(req, ENOENT);
}

static void fbid_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int err = node_stat(ino, &st);

	(void)fi;
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, 3600);
}

static void fbid_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const char *name = ino_name(ino);
	int fd;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (ino == TRIGGER_INO) {
		fi->fh = -1;
		fuse_reply_open(req, fi);
		return;
	}
	fd = name ? openat(srcfd, name, O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0) {
		fuse_reply_err(req, name ? errno : ENOENT);
		return;
	}
	fi->fh = fd;
	/*
	 * Through the page cache (no direct_io), so that the kernel looks for
	 * the note there; and not kept (no keep_cache): every open drops the
	 * inode's cached pages, so that at the mmap() of a file that was
	 * opened and not read, its note is not cached.
	 */
	fi->direct_io = 0;
	fi->keep_cache = 0;
	fuse_reply_open(req, fi);
}

static void fbid_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	char *buf = malloc(size ? size : 1);
	ssize_t n;

	(void)ino;
	n = buf && (int)fi->fh >= 0 ? pread(fi->fh, buf, size, off) : 0;
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, buf, n);
	free(buf);
}

static void fbid_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	if ((int)fi->fh >= 0)
		close(fi->fh);
	fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops fbid_ops = {
	.lookup		= fbid_lookup,
	.getattr	= fbid_getattr,
	.open		= fbid_open,
	.read		= fbid_read,
	.release	= fbid_release,
};

/*
 * The helper thread of --self-map: opens the files on the mount (the loop
 * thread answers), waits through the trigger, then closes them. It never
 * reads /dev/fuse.
 */
static void *self_helper(void *arg)
{
	char path[PATH_MAX];
	int i;

	(void)arg;
	for (i = 0; i < nself; i++) {
		snprintf(path, sizeof(path), "%s/%s", mnt, self[i].name);
		target_open(&self[i], path);
	}
	sem_post(&self_opened);
	printf("ready\n");
	fflush(stdout);
	sem_wait(&self_done);
	for (i = 0; i < nself; i++)
		if (self[i].fd >= 0)
			close(self[i].fd);
	printf("closed\n");
	fflush(stdout);
	return NULL;
}

static int serve(int argc, char **argv)
{
	char *fargv[] = { "fbid", "-o", "ro,fsname=fbid,subtype=fbid", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse_session *se;
	struct dirent *de;
	pthread_t helper;
	DIR *dir;
	int i, ret;

	if (argc < 4)
		return 2;
	mnt = argv[3];
	for (i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--self-map") || i + 1 == argc || nself == MAX_SELF)
			return 2;
		self[nself++] = (struct target){ .name = argv[++i], .fd = -1 };
	}

	srcfd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = srcfd >= 0 ? fdopendir(dup(srcfd)) : NULL;
	if (!dir) {
		fprintf(stderr, "fbid: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	while ((de = readdir(dir)) && nnames < MAX_FILES)
		if (de->d_type == DT_REG)
			names[nnames++] = strdup(de->d_name);
	closedir(dir);

	/* The event watches the main thread, which alone will map. */
	if (nself && (ret = rb_open(-1))) {
		printf("result all: error (perf_event_open with mmap3: %s)\n", strerror(-ret));
		return 1;
	}
	sem_init(&self_opened, 0, 0);
	sem_init(&self_done, 0, 0);

	se = fuse_session_new(&args, &fbid_ops, sizeof(fbid_ops), NULL);
	if (!se || fuse_set_signal_handlers(se) || fuse_session_mount(se, mnt)) {
		fprintf(stderr, "fbid: cannot mount %s\n", mnt);
		return 1;
	}
	if (nself) {
		if (pthread_create(&helper, NULL, self_helper, NULL)) {
			fprintf(stderr, "fbid: pthread_create failed\n");
			return 1;
		}
		pthread_detach(helper);
	} else {
		printf("ready\n");
		fflush(stdout);
	}
	ret = fuse_session_loop(se);	/* single-threaded: this thread only */
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	return ret ? 1 : 0;
}

/* ---- map: one mapping, by a process of its own */

/*
 * --count: map @t @count times, each record's flags counted, then the
 * build-id records of the file counted and compared.
 */
static void map_count(struct target *t, long count)
{
	long pending = 0, err = 0, other = 0, got = 0, differ = 0, i;
	const struct mmap3_build_id_fixed *b;
	unsigned char first[20] = { 0 };
	const struct mmap3_fixed *r;
	struct perf_event_header *h;
	unsigned int first_size = 0;
	int tries = 0;
	void *p;

	for (i = 0; i < count; i++) {
		p = mmap(NULL, t->st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, t->fd, 0);
		if (p == MAP_FAILED) {
			printf("records %s: error (mmap %ld: %s)\n", t->name, i, strerror(errno));
			return;
		}
		while ((h = rb_next())) {
			r = (const void *)h;
			if (h->type == PERF_RECORD_MMAP3 && r->addr == (unsigned long)p)
				break;
		}
		munmap(p, t->st.st_size);
		if (!h)
			other++;	/* no record */
		else if (r->mmap3_flags == PERF_MMAP3_BUILD_ID_PENDING && !r->build_id_size)
			pending++;
		else if (r->mmap3_flags == PERF_MMAP3_BUILD_ID_ERR && !r->build_id_size)
			err++;
		else
			other++;
	}
	printf("records %s: %ld mappings, %ld pending, %ld err, %ld other\n",
	       t->name, count, pending, err, other);

	while (got < pending && ((h = rb_next()) || (tries++ < 12000 && !usleep(10000)))) {
		if (!h)
			continue;
		b = (const void *)h;
		if (h->type != PERF_RECORD_MMAP3_BUILD_ID ||
		    b->maj != major(t->st.st_dev) || b->min != minor(t->st.st_dev) ||
		    b->ino != t->st.st_ino)
			continue;
		if (b->build_id_size > sizeof(first) || b->fixed_size < sizeof(*b)) {
			differ++;
		} else if (!got++) {
			first_size = b->build_id_size;
			memcpy(first, (const unsigned char *)b + b->fixed_size, first_size);
		} else if (b->build_id_size != first_size ||
			   memcmp(first, (const unsigned char *)b + b->fixed_size, first_size)) {
			differ++;
		}
	}
	printf("results %s: %ld build-id records, %s ", t->name, got,
	       differ ? "differ, first" : "all");
	for (i = 0; i < first_size; i++)
		printf("%02x", first[i]);
	printf("\n");
}

static int map(int argc, char **argv)
{
	struct target t = { .name = argc > 2 ? argv[2] : NULL, .fd = -1 };
	int read_first = argc == 4 && !strcmp(argv[3], "--read-first");
	int cpu = argc == 5 && !strcmp(argv[3], "--cpu") ? atoi(argv[4]) : -1;
	long count = argc == 5 && !strcmp(argv[3], "--count") ? atol(argv[4]) : 0;
	char line[64], buf[65536];
	cpu_set_t set;
	off_t off = 0;
	ssize_t n;
	int ret;

	if (argc < 3 || (argc == 4 && !read_first) ||
	    (argc == 5 && cpu < 0 && count <= 0) || argc > 5)
		return 2;
	if (cpu >= 0) {
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			printf("result %s: error (sched_setaffinity %d: %s)\n", t.name, cpu,
			       strerror(errno));
			return 1;
		}
	}
	ret = rb_open(cpu);
	if (ret) {
		printf("result %s: error (perf_event_open with mmap3: %s)\n", t.name,
		       strerror(-ret));
		return 1;
	}
	if (target_open(&t, t.name))
		return 1;
	if (read_first)
		while ((n = pread(t.fd, buf, sizeof(buf), off)) > 0)
			off += n;
	printf("opened\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		clearerr(stdin);
	if (!read_first)
		posix_fadvise(t.fd, 0, 0, POSIX_FADV_DONTNEED);
	if (count)
		map_count(&t, count);
	else
		target_map(&t);
	while (fgets(line, sizeof(line), stdin))
		;
	close(t.fd);
	return 0;
}

int main(int argc, char **argv)
{
	int ret = 2;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "serve"))
		ret = serve(argc, argv);
	else if (argc > 1 && !strcmp(argv[1], "map"))
		ret = map(argc, argv);
	if (ret == 2)
		fprintf(stderr, "usage: fbid serve SRCDIR MNT [--self-map NAME]...\n"
				"       fbid map FILE [--read-first | --cpu CPU | --count N]\n");
	return ret;
}
