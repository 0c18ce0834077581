/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mmap3-check.h: walk every record of a perf ring buffer and check that it
 * is well formed, PERF_RECORD_MMAP3 in detail (the layout with fixed_size,
 * Documentation/userspace-api/perf_mmap3.rst).
 *
 *	struct mmap3_check c;
 *
 *	mmap3_check_init(&c, &attr);		// the attr the event was opened with
 *	mmap3_check_drain(&c, base, data_size);	// as often as wanted
 *	c.records, c.by_type[], c.lost, c.malformed, c.first_reason
 *
 * The drain is the reader side of the ring buffer protocol: data_head is
 * loaded with acquire semantics (the kernel's smp_wmb() before it pairs with
 * it), records that wrap around the end of the buffer are copied out, and
 * data_tail is stored after a full barrier, so that the kernel does not
 * overwrite a record before it has been read.
 */
#ifndef MMAP3_CHECK_H
#define MMAP3_CHECK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include <linux/perf_event.h>

#define MMAP3_TYPE		23	/* PERF_RECORD_MMAP3 */
#define MMAP3_FIXED_SIZE	80
#define MMAP3_BUILD_ID_MAX	20

#define MMAP3_F_CODE_REGION	1u
#define MMAP3_F_UNMAP		2u
#define MMAP3_F_BUILD_ID_ERR	4u
#define MMAP3_F_BUILD_ID_PENDING 8u
#define MMAP3_F_RUNDOWN		16u
#define MMAP3_F_KNOWN		0x1fu

#define MMAP3_BUILD_ID_TYPE	24	/* PERF_RECORD_MMAP3_BUILD_ID */
#define MMAP3_BUILD_ID_FIXED	48

/* The fixed part of PERF_RECORD_MMAP3_BUILD_ID. */
struct mmap3_build_id_fixed {
	struct perf_event_header header;
	__u32	pid, tid;
	__u32	maj, min;
	__u64	ino;
	__u64	ino_generation;
	__u16	mmap3_flags;
	__u8	build_id_size;
	__u8	__reserved_1;
	__u16	fixed_size;
	__u16	__reserved_2;
};

_Static_assert(sizeof(struct mmap3_build_id_fixed) == MMAP3_BUILD_ID_FIXED,
	       "MMAP3_BUILD_ID fixed part");

/* The fixed part of PERF_RECORD_MMAP3. */
struct mmap3_fixed {
	struct perf_event_header header;
	__u32	pid, tid;
	__u64	addr;
	__u64	len;
	__u64	pgoff;
	__u32	maj, min;
	__u64	ino;
	__u64	ino_generation;
	__u32	prot, flags;
	__u16	mmap3_flags;
	__u8	build_id_size;
	__u8	__reserved_1;
	__u16	fixed_size;		/* offset 76 */
	__u16	__reserved_2;
};

_Static_assert(sizeof(struct mmap3_fixed) == MMAP3_FIXED_SIZE, "MMAP3 fixed part");
_Static_assert(__builtin_offsetof(struct mmap3_fixed, fixed_size) == 76, "fixed_size");

/* An MMAP3 record taken apart, for the callback. */
struct mmap3_view {
	const struct mmap3_fixed *r;
	const __u8	*build_id;	/* build_id_size bytes */
	const char	*filename;	/* NUL terminated */
	size_t		filename_len;	/* strlen */
	const __u32	*sample_tid;	/* pid, tid of sample_id, or NULL */
};

#define MMAP3_CHECK_REC_MAX	65536

struct mmap3_check {
	/* From the attr. */
	__u64	sample_type;
	bool	sample_id_all;
	size_t	id_size;		/* of sample_id */
	size_t	sample_size;		/* of a PERF_RECORD_SAMPLE, 0: variable */
	int	tid_off;		/* of pid/tid in sample_id, -1: none */

	/*
	 * Called for every record that passed the checks, MMAP3 ones with
	 * @v set; a non-zero return marks the record malformed, with the
	 * reason written to @why (256 bytes).
	 */
	int	(*cb)(void *arg, const struct perf_event_header *h,
		      const struct mmap3_view *v, char *why);
	void	*cb_arg;

	/* Results. */
	__u64	records;
	__u64	by_type[32];		/* [31]: types >= 31 */
	__u64	mmap3_code_regions;
	__u64	mmap3_unmaps;
	__u64	mmap3_build_ids;
	__u64	mmap3_build_id_errs;
	__u64	mmap3_build_id_pending;	/* MMAP3 records with BUILD_ID_PENDING */
	__u64	mmap3_build_id_records;	/* PERF_RECORD_MMAP3_BUILD_ID */
	__u64	lost;			/* sum of PERF_RECORD_LOST::lost */
	__u64	lost_records;
	__u64	malformed;
	char	first_reason[320];

	unsigned char *buf;		/* a wrapped record, copied */
};

static inline size_t mmap3_check_id_size(__u64 st, bool all, int *tid_off)
{
	size_t n = 0;

	*tid_off = -1;
	if (!all)
		return 0;
	if (st & PERF_SAMPLE_TID) {
		*tid_off = n;
		n += 8;
	}
	if (st & PERF_SAMPLE_TIME)
		n += 8;
	if (st & PERF_SAMPLE_ID)
		n += 8;
	if (st & PERF_SAMPLE_STREAM_ID)
		n += 8;
	if (st & PERF_SAMPLE_CPU)
		n += 8;
	if (st & PERF_SAMPLE_IDENTIFIER)
		n += 8;
	return n;
}

static inline void mmap3_check_init(struct mmap3_check *c,
				    const struct perf_event_attr *attr)
{
	const __u64 fixed = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			    PERF_SAMPLE_ADDR | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |
			    PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
			    PERF_SAMPLE_IDENTIFIER;
	memset(c, 0, sizeof(*c));
	c->sample_type = attr->sample_type;
	c->sample_id_all = attr->sample_id_all;
	c->id_size = mmap3_check_id_size(c->sample_type, c->sample_id_all,
					 &c->tid_off);
	if (!(c->sample_type & ~fixed))
		c->sample_size = sizeof(struct perf_event_header) +
				 8 * __builtin_popcountll(c->sample_type);
	c->buf = malloc(MMAP3_CHECK_REC_MAX);
	if (!c->buf)
		abort();
}

static inline void mmap3_check_free(struct mmap3_check *c)
{
	free(c->buf);
	c->buf = NULL;
}

static inline bool mmap3_all_zero(const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n--)
		if (*b++)
			return false;
	return true;
}

__attribute__((format(printf, 3, 4)))
static inline int mmap3_bad(struct mmap3_check *c, const struct perf_event_header *h,
			    const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (!c->malformed++)
		snprintf(c->first_reason, sizeof(c->first_reason),
			 "record type %u misc %#x size %u: %s",
			 h ? h->type : 0, h ? h->misc : 0, h ? h->size : 0, why);
	return -1;
}

/* The NUL-terminated, zero-padded string of @n bytes at @s. */
static inline const char *mmap3_padded_str(const char *s, size_t n)
{
	const char *nul = memchr(s, 0, n);

	if (!nul)
		return "not NUL terminated";
	if (!mmap3_all_zero(nul, s + n - nul))
		return "non-zero byte after the NUL";
	return NULL;
}

static inline int mmap3_check_mmap3(struct mmap3_check *c,
				    const struct perf_event_header *h)
{
	const struct mmap3_fixed *r = (const void *)h;
	const unsigned char *b = (const void *)h;
	struct mmap3_view v = { .r = r };
	size_t fixed, id_pad, fn_off, fn_end;
	const char *err;
	char why[256];

	if (h->size < MMAP3_FIXED_SIZE)
		return mmap3_bad(c, h, "MMAP3 shorter than its fixed part");
	fixed = r->fixed_size;
	if (fixed < MMAP3_FIXED_SIZE || fixed % 8)
		return mmap3_bad(c, h, "fixed_size %zu", fixed);
	if (r->__reserved_1 || r->__reserved_2)
		return mmap3_bad(c, h, "reserved bytes %#x %#x", r->__reserved_1,
				 r->__reserved_2);
	if (r->build_id_size > MMAP3_BUILD_ID_MAX)
		return mmap3_bad(c, h, "build_id_size %u", r->build_id_size);
	if (r->mmap3_flags & ~MMAP3_F_KNOWN)
		return mmap3_bad(c, h, "unknown mmap3_flags %#x", r->mmap3_flags);
	if ((r->mmap3_flags & MMAP3_F_BUILD_ID_ERR) && r->build_id_size)
		return mmap3_bad(c, h, "BUILD_ID_ERR with build_id_size %u",
				 r->build_id_size);
	if ((r->mmap3_flags & MMAP3_F_BUILD_ID_PENDING) &&
	    (r->build_id_size || (r->mmap3_flags & MMAP3_F_BUILD_ID_ERR) ||
	     !r->ino || (r->mmap3_flags & MMAP3_F_CODE_REGION) ||
	     (h->misc & PERF_RECORD_MISC_MMAP_DATA)))
		return mmap3_bad(c, h, "BUILD_ID_PENDING with flags %#x, "
				 "build_id_size %u, ino %llu, misc %#x",
				 r->mmap3_flags, r->build_id_size,
				 (unsigned long long)r->ino, h->misc);
	if (!r->len)
		return mmap3_bad(c, h, "len 0");
	if (r->addr + r->len < r->addr)
		return mmap3_bad(c, h, "addr %#llx + len %#llx overflows",
				 (unsigned long long)r->addr, (unsigned long long)r->len);

	id_pad = (r->build_id_size + 7) & ~7UL;
	fn_off = fixed + id_pad;
	if (h->size < c->id_size || fn_off + 8 > h->size - c->id_size)
		return mmap3_bad(c, h, "no room for build-id (%u), a file name and "
				 "sample_id (%zu) after fixed_size %zu",
				 r->build_id_size, c->id_size, fixed);
	fn_end = h->size - c->id_size;
	if (!mmap3_all_zero(b + fixed + r->build_id_size, id_pad - r->build_id_size))
		return mmap3_bad(c, h, "build-id padding not zero");
	err = mmap3_padded_str((const char *)b + fn_off, fn_end - fn_off);
	if (err)
		return mmap3_bad(c, h, "file name: %s", err);

	if (r->mmap3_flags & MMAP3_F_CODE_REGION) {
		if (r->prot != PROT_EXEC || r->flags)
			return mmap3_bad(c, h, "code region with prot %#x flags %#x",
					 r->prot, r->flags);
		if (r->maj || r->min || r->ino || r->ino_generation)
			return mmap3_bad(c, h, "code region with an inode");
		if (r->mmap3_flags & MMAP3_F_BUILD_ID_ERR)
			return mmap3_bad(c, h, "code region with BUILD_ID_ERR");
		if ((r->mmap3_flags & MMAP3_F_UNMAP) &&
		    (r->mmap3_flags & MMAP3_F_RUNDOWN))
			return mmap3_bad(c, h, "code region with UNMAP and RUNDOWN");
		if (h->misc != PERF_RECORD_MISC_USER)
			return mmap3_bad(c, h, "code region with misc %#x", h->misc);
	} else {
		bool data = h->misc & PERF_RECORD_MISC_MMAP_DATA;

		if (r->mmap3_flags & (MMAP3_F_UNMAP | MMAP3_F_RUNDOWN))
			return mmap3_bad(c, h, "UNMAP/RUNDOWN without CODE_REGION");
		if ((h->misc & ~PERF_RECORD_MISC_MMAP_DATA) != PERF_RECORD_MISC_USER)
			return mmap3_bad(c, h, "misc %#x", h->misc);
		if (data != !(r->prot & PROT_EXEC))
			return mmap3_bad(c, h, "MMAP_DATA %d with prot %#x", data, r->prot);
		/* Build-ids are looked for in executable mappings only. */
		if (data &&
		    (r->build_id_size || (r->mmap3_flags & MMAP3_F_BUILD_ID_ERR)))
			return mmap3_bad(c, h, "data mapping with build_id_size %u, "
					 "mmap3_flags %#x", r->build_id_size,
					 r->mmap3_flags);
	}

	v.build_id = b + fixed;
	v.filename = (const char *)b + fn_off;
	v.filename_len = strlen(v.filename);
	if (c->tid_off >= 0) {
		v.sample_tid = (const __u32 *)(b + fn_end + c->tid_off);
		if (v.sample_tid[0] != r->pid || v.sample_tid[1] != r->tid)
			return mmap3_bad(c, h, "pid/tid %u/%u, sample_id's %u/%u",
					 r->pid, r->tid, v.sample_tid[0],
					 v.sample_tid[1]);
	}

	c->mmap3_code_regions += !!(r->mmap3_flags & MMAP3_F_CODE_REGION);
	c->mmap3_unmaps += !!(r->mmap3_flags & MMAP3_F_UNMAP);
	c->mmap3_build_ids += !!r->build_id_size;
	c->mmap3_build_id_errs += !!(r->mmap3_flags & MMAP3_F_BUILD_ID_ERR);
	c->mmap3_build_id_pending += !!(r->mmap3_flags & MMAP3_F_BUILD_ID_PENDING);

	if (c->cb && c->cb(c->cb_arg, h, &v, why))
		return mmap3_bad(c, h, "%s", why);
	return 0;
}

static inline int mmap3_check_build_id(struct mmap3_check *c,
				       const struct perf_event_header *h)
{
	const struct mmap3_build_id_fixed *r = (const void *)h;
	const unsigned char *b = (const void *)h;
	size_t id_pad;
	const __u32 *tid;

	if (h->size < MMAP3_BUILD_ID_FIXED)
		return mmap3_bad(c, h, "MMAP3_BUILD_ID shorter than its fixed part");
	if (r->fixed_size != MMAP3_BUILD_ID_FIXED)
		return mmap3_bad(c, h, "MMAP3_BUILD_ID fixed_size %u", r->fixed_size);
	if (r->__reserved_1 || r->__reserved_2)
		return mmap3_bad(c, h, "MMAP3_BUILD_ID reserved bytes %#x %#x",
				 r->__reserved_1, r->__reserved_2);
	if (h->misc != PERF_RECORD_MISC_USER)
		return mmap3_bad(c, h, "MMAP3_BUILD_ID misc %#x", h->misc);
	if (r->build_id_size > MMAP3_BUILD_ID_MAX)
		return mmap3_bad(c, h, "MMAP3_BUILD_ID build_id_size %u", r->build_id_size);
	if (r->mmap3_flags & ~MMAP3_F_BUILD_ID_ERR)
		return mmap3_bad(c, h, "MMAP3_BUILD_ID mmap3_flags %#x", r->mmap3_flags);
	if ((r->mmap3_flags & MMAP3_F_BUILD_ID_ERR) && r->build_id_size)
		return mmap3_bad(c, h, "MMAP3_BUILD_ID with ERR and build_id_size %u",
				 r->build_id_size);
	if (!r->ino)
		return mmap3_bad(c, h, "MMAP3_BUILD_ID without an inode");
	id_pad = (r->build_id_size + 7) & ~7UL;
	if (h->size != MMAP3_BUILD_ID_FIXED + id_pad + c->id_size)
		return mmap3_bad(c, h, "MMAP3_BUILD_ID of size %u, build_id_size %u",
				 h->size, r->build_id_size);
	if (!mmap3_all_zero(b + MMAP3_BUILD_ID_FIXED + r->build_id_size,
			    id_pad - r->build_id_size))
		return mmap3_bad(c, h, "MMAP3_BUILD_ID build-id padding not zero");
	if (c->tid_off >= 0) {
		tid = (const __u32 *)(b + MMAP3_BUILD_ID_FIXED + id_pad + c->tid_off);
		if (tid[0] != r->pid || tid[1] != r->tid)
			return mmap3_bad(c, h, "MMAP3_BUILD_ID pid/tid %u/%u, sample_id's %u/%u",
					 r->pid, r->tid, tid[0], tid[1]);
	}
	c->mmap3_build_id_records++;
	c->mmap3_build_ids += !!r->build_id_size;
	c->mmap3_build_id_errs += !!(r->mmap3_flags & MMAP3_F_BUILD_ID_ERR);
	return 0;
}

/* Check one record of @h->size bytes, all of them readable. */
static inline int mmap3_check_record(struct mmap3_check *c,
				     const struct perf_event_header *h)
{
	size_t id = c->id_size, n = h->size;
	const char *s, *err;
	char why[256];

	c->records++;
	c->by_type[h->type < 31 ? h->type : 31]++;

	switch (h->type) {
	case MMAP3_TYPE:
		return mmap3_check_mmap3(c, h);
	case MMAP3_BUILD_ID_TYPE:
		if (mmap3_check_build_id(c, h))
			return -1;
		break;
	case PERF_RECORD_LOST:
		if (n != 8 + 16 + id)
			return mmap3_bad(c, h, "LOST of size %zu", n);
		c->lost += ((const __u64 *)(h + 1))[1];
		c->lost_records++;
		break;
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		if (n != 8 + 24 + id)
			return mmap3_bad(c, h, "FORK/EXIT of size %zu", n);
		break;
	case PERF_RECORD_THROTTLE:
	case PERF_RECORD_UNTHROTTLE:
		if (n != 8 + 24 + id)
			return mmap3_bad(c, h, "(UN)THROTTLE of size %zu", n);
		break;
	case PERF_RECORD_COMM:
		if (n < 8 + 8 + 8 + id)
			return mmap3_bad(c, h, "COMM of size %zu", n);
		s = (const char *)h + 16;
		err = mmap3_padded_str(s, n - 16 - id);
		if (err)
			return mmap3_bad(c, h, "COMM name: %s", err);
		break;
	case PERF_RECORD_MMAP:
	case PERF_RECORD_MMAP2: {
		size_t fixed = h->type == PERF_RECORD_MMAP ? 8 + 32 : 8 + 64;

		if (n < fixed + 8 + id)
			return mmap3_bad(c, h, "MMAP/MMAP2 of size %zu", n);
		/* MMAP2 with a build-id has trailing zero bytes in the union. */
		s = (const char *)h + fixed;
		if (!memchr(s, 0, n - fixed - id))
			return mmap3_bad(c, h, "MMAP/MMAP2 file name not terminated");
		break;
	}
	case PERF_RECORD_SAMPLE:
		if (c->sample_size && n != c->sample_size)
			return mmap3_bad(c, h, "SAMPLE of size %zu, expected %zu", n,
					 c->sample_size);
		break;
	default:
		if (h->type == 0 || h->type >= PERF_RECORD_MAX)
			return mmap3_bad(c, h, "unknown record type");
		break;
	}
	if (c->cb && c->cb(c->cb_arg, h, NULL, why))
		return mmap3_bad(c, h, "%s", why);
	return 0;
}

/*
 * Read and check every record between data_tail and data_head of the ring
 * buffer mapped at @base, whose data area has @data_size bytes (0: take it
 * from the control page). Returns the number of records read, -1 when the
 * buffer itself is broken (then it is emptied).
 */
static inline long mmap3_check_drain(struct mmap3_check *c, void *base,
				     size_t data_size)
{
	struct perf_event_mmap_page *pg = base;
	const unsigned char *data;
	__u64 head, tail, size;
	long n = 0;

	size = pg->data_size ? pg->data_size : data_size;
	data = (const unsigned char *)base +
	       (pg->data_offset ? pg->data_offset : (size_t)sysconf(_SC_PAGESIZE));
	if (!size)
		return 0;
	/* smp_rmb() after reading data_head: acquire. */
	head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	tail = pg->data_tail;	/* ours: only this reader writes it */
	if (head - tail > size) {
		mmap3_bad(c, NULL, "data_head %llu is %llu bytes past data_tail %llu, "
			  "buffer %llu", (unsigned long long)head,
			  (unsigned long long)(head - tail), (unsigned long long)tail,
			  (unsigned long long)size);
		tail = head;
		n = -1;
		goto out;
	}
	while (tail < head) {
		struct perf_event_header hdr;
		const struct perf_event_header *h;
		size_t off = tail % size, i;

		if (head - tail < sizeof(hdr)) {
			mmap3_bad(c, NULL, "%llu bytes left, less than a header",
				  (unsigned long long)(head - tail));
			tail = head;
			n = -1;
			break;
		}
		for (i = 0; i < sizeof(hdr); i++)
			((unsigned char *)&hdr)[i] = data[(off + i) % size];
		if (hdr.size < sizeof(hdr) || hdr.size % 8 || hdr.size > head - tail) {
			mmap3_bad(c, &hdr, "header size does not fit: %llu bytes left",
				  (unsigned long long)(head - tail));
			tail = head;
			n = -1;
			break;
		}
		if (off + hdr.size <= size) {
			h = (const void *)(data + off);
		} else {	/* wraps: copy it out */
			size_t first = size - off;

			memcpy(c->buf, data + off, first);
			memcpy(c->buf + first, data, hdr.size - first);
			h = (const void *)c->buf;
		}
		mmap3_check_record(c, h);
		tail += hdr.size;
		if (n >= 0)
			n++;
	}
out:
	/* smp_mb() between reading the records and freeing their space. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
	return n;
}

/* A one-line summary: "R records (MMAP3 M, code regions C, ...)". */
static inline void mmap3_check_summary(const struct mmap3_check *c, char *s, size_t n)
{
	snprintf(s, n, "%llu records (MMAP3 %llu: %llu code regions, %llu unmaps, "
		 "%llu build-ids, %llu build-id errors; FORK %llu EXIT %llu COMM %llu "
		 "SAMPLE %llu LOST %llu of %llu), %llu malformed",
		 (unsigned long long)c->records,
		 (unsigned long long)c->by_type[MMAP3_TYPE],
		 (unsigned long long)c->mmap3_code_regions,
		 (unsigned long long)c->mmap3_unmaps,
		 (unsigned long long)c->mmap3_build_ids,
		 (unsigned long long)c->mmap3_build_id_errs,
		 (unsigned long long)c->by_type[PERF_RECORD_FORK],
		 (unsigned long long)c->by_type[PERF_RECORD_EXIT],
		 (unsigned long long)c->by_type[PERF_RECORD_COMM],
		 (unsigned long long)c->by_type[PERF_RECORD_SAMPLE],
		 (unsigned long long)c->lost_records,
		 (unsigned long long)c->lost,
		 (unsigned long long)c->malformed);
}

#endif /* MMAP3_CHECK_H */
