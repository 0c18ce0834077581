/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libperfjit: make the code a JIT compiler writes visible to perf.
 *
 * A runtime opens one session, announces each piece of code it makes
 * executable (perfjit_load) and each piece it frees or moves
 * (perfjit_unload, perfjit_move), and closes the session at exit.
 *
 * On a kernel with prctl(PR_PERF_CODE_REGION) the library stores an ELF
 * "side file" for the code in perf's build-id cache and announces the
 * region to the perf recordings that watch the process and asked for code
 * regions; perf report, annotate and script then show the code by name,
 * with no perf inject step. The runtime needs no permission, at any
 * perf_event_paranoid: it describes its own memory, as an mmap() does.
 * Until a recorder asks for the process's code, a load makes no system
 * call, hashes nothing and stores nothing. When one asks (perf record,
 * however late), the kernel signals the library, whose thread announces
 * the code that is live again (a "rundown") and then stores its side
 * files, so that the recorder names code loaded before it started. From
 * then on each load is announced at once, and the library's thread writes
 * its side file soon after, so that the runtime does not wait for a file
 * write. Single loads share a side file, a "pack", that the thread writes
 * when it holds 1,024 functions or 4 MiB of code, or 100 ms after it was
 * first needed, and at once when a recorder asks for a rundown; its
 * build-id is unique to it rather than a hash of its content.
 * perfjit_close() and exit() wait for what is still to be written
 * (a process killed by a signal loses it: a runtime that ends on SIGTERM
 * should close its sessions first).
 * On other kernels it writes /tmp/perf-PID.map lines or a jitdump file.
 *
 * Every function returns 0 or a negative errno value; perfjit_strerror()
 * describes it. Sessions are thread-safe. After fork() the child's first
 * call registers the child for rundowns of its own: the child announces
 * its code, never the parent's, and writes fallback files of its own.
 *
 * The structs that grow (perfjit_options, perfjit_code) start with their
 * size, as the caller's header had it, and are read as libbpf reads its
 * options: a smaller struct, from an older header, leaves the fields past
 * its size at their defaults (zero); a larger one, from a newer header,
 * must be zero past what this library knows (else -E2BIG), so that nothing
 * asked for is ignored. A size that cuts the first version's fields, or is
 * not a multiple of 8, is -EINVAL.
 */
#ifndef PERFJIT_H
#define PERFJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PERFJIT_API __attribute__((visibility("default")))

/* How code is announced. */
enum perfjit_mode {
	/* Code regions if the kernel has them, else the fallback. */
	PERFJIT_MODE_AUTO = 0,
	/* Code regions and side files; -EOPNOTSUPP without. */
	PERFJIT_MODE_CODE_REGION = 1,
	/* Lines in /tmp/perf-PID.map: names only, no reuse, no annotate. */
	PERFJIT_MODE_PERF_MAP = 2,
	/* A jitdump file, for perf record -k 1 and perf inject --jit. */
	PERFJIT_MODE_JITDUMP = 3,
};

/*
 * perfjit_options::flags. PERFJIT_OPEN_NO_THREAD: the library starts no
 * thread of its own for rundowns; the runtime polls perfjit_rundown_fd()
 * and calls perfjit_rundown() when it is readable (at a safepoint, say).
 * The code-region sessions of a process all have it or all lack it (the
 * kernel signals one descriptor per process): -EINVAL otherwise.
 */
#define PERFJIT_OPEN_NO_THREAD 0x1u

struct perfjit_options {
	uint32_t size;	   /* sizeof(struct perfjit_options) */
	uint32_t mode;	   /* enum perfjit_mode */
	uint32_t fallback; /* for AUTO: PERF_MAP (0 means PERF_MAP) or JITDUMP */
	uint32_t flags;	   /* PERFJIT_OPEN_* */
	/* Side files go to <buildid_dir>/.build-id/xx/yyy. NULL: $PERF_BUILDID_DIR, else ~/.debug.
	 * Once a recorder asks, <buildid_dir>/.build-id/.code-regions is kept mapped, read-only,
	 * so that perf record run by another user or in another mount namespace finds the
	 * side files here. */
	const char *buildid_dir;
	/* The jitdump file goes here. NULL: $JITDUMPDIR, else ~/.debug/jit. */
	const char *jitdump_dir;
	/*
	 * A bound, in bytes, for the JIT side files in buildid_dir: the regular
	 * files named by a 20-byte build-id under .build-id/xx/, whoever wrote
	 * them (this library, another runtime, or perf when it copied one from
	 * a runtime's own directory or from debuginfod). perf's cache entries
	 * for ELF files are symbolic links there, and are left alone. Past the
	 * bound, the oldest go first, by modification time, which a rundown
	 * refreshes for the files it needs; never one that a live region of
	 * this session uses, nor one that another session pinned: a session
	 * hard-links the side files of its live code into .build-id/.live/
	 * (since 1.0), and a bound leaves a file with more than one link.
	 * Each session counts what it writes and measures the directory
	 * again when its count reaches the bound.
	 * 0: PERFJIT_DIR_DEFAULT_BYTES; PERFJIT_DIR_UNBOUNDED: no bound.
	 * Since libperfjit 0.3.
	 */
	uint64_t max_dir_bytes;
	/*
	 * Called after each rundown of the session: on the library's thread
	 * when a recorder asks, or in perfjit_rundown() (not in one that the
	 * callback itself calls, on its thread). For a runtime whose
	 * reporting costs even while nobody records (V8's code-event handler
	 * slows its compiler, a JVM's code events cost it each compile),
	 * which then reports nothing until perfjit_asked() is 1 or this is
	 * called, and then reports the code that exists (one perfjit_load_many()
	 * of an enumeration, then perfjit_rundown(), so that the recorder names
	 * samples in it from before) and each load from then on.
	 * It must return soon, must not throw and must not close the session.
	 * NULL: none.
	 * Since libperfjit 0.4.
	 */
	void (*on_asked)(void *arg);
	void *on_asked_arg;
	/*
	 * Told what went wrong where no call could return it (a side file
	 * that the library's thread could not store, a rundown that failed),
	 * and what lies behind an error that a call returns (what libelf,
	 * OpenSSL or a system call said, and about which file): one line,
	 * without a newline, of a PERFJIT_LOG_* level. Called on any thread,
	 * the library's own included, possibly with the session's lock held:
	 * it must return soon, must not throw and must not call the library.
	 * NULL: nothing is said.
	 * Since libperfjit 0.5.
	 */
	void (*log)(void *arg, int level, const char *message);
	void *log_arg;
};

/* perfjit_options::log's levels. */
enum perfjit_log_level {
	PERFJIT_LOG_ERROR = 0,	 /* something asked for was not done */
	PERFJIT_LOG_WARNING = 1, /* done, but not as well as it could be */
};

/* The size of struct perfjit_options before max_dir_bytes: still accepted. */
#define PERFJIT_OPTIONS_SIZE_VER0 offsetof(struct perfjit_options, max_dir_bytes)
/* The size of struct perfjit_options before on_asked (libperfjit 0.3). */
#define PERFJIT_OPTIONS_SIZE_VER1 offsetof(struct perfjit_options, on_asked)
/* The size of struct perfjit_options before log (libperfjit 0.4). */
#define PERFJIT_OPTIONS_SIZE_VER2 offsetof(struct perfjit_options, log)
#define PERFJIT_DIR_DEFAULT_BYTES (256ull << 20)
#define PERFJIT_DIR_UNBOUNDED UINT64_MAX

/* One row of a line table: the code at @offset comes from @line. */
struct perfjit_line {
	uint64_t offset; /* from the start of the code */
	uint32_t line;	 /* 1-based line in perfjit_code::source_file */
	uint32_t column; /* 0: unknown */
};

/*
 * Code of another function inlined into the one announced, for perf
 * report --inline and perf script: the code at [start, end) (offsets from
 * the start of the code) runs @name, inlined by its caller at @call_line.
 * The caller is the announced function itself at depth 1, else the nearest
 * entry before this one with depth - 1, whose range holds this one. Sort
 * the entries by start, a caller before what it inlines. The line table's
 * rows inside an entry's range are lines of the innermost entry's @file.
 */
struct perfjit_inline {
	uint64_t start;
	uint64_t end;
	const char *name;   /* the inlined function */
	const char *file;   /* its source file; NULL: unknown */
	uint32_t call_line; /* in the caller's source file; 0: unknown */
	uint32_t depth;	    /* 1: inlined into the announced function */
};

struct perfjit_code {
	uint32_t size;	     /* sizeof(struct perfjit_code): fields grow at its end */
	uint32_t generation; /* how many times this method was compiled before */
	const char *name;    /* the symbol perf shows */
	const void *addr;    /* the code, mapped executable */
	size_t len;	     /* its length in bytes */
	/* Optional line table: rows sorted by offset, with a source file. */
	const char *source_file;
	const struct perfjit_line *lines;
	size_t nr_lines;
	/*
	 * Optional unwind table: .eh_frame contents (a CIE and its FDEs,
	 * pc-relative) as if placed at the first 8-byte aligned address
	 * after the code, as jitdump's unwinding records are. perf unwinds
	 * through the code with it (--call-graph dwarf); the library adds
	 * the .eh_frame_hdr. With the jitdump fallback, perf inject --jit
	 * maps the table and a header of 12 + 8 * FDEs bytes after the code
	 * as if they were there: keep that memory free of other code (for
	 * example, put the table there).
	 */
	const void *eh_frame;
	size_t eh_frame_len;
	/*
	 * Optional (from library 0.2; a size of PERFJIT_CODE_SIZE_VER0
	 * leaves it out): what was inlined where, written to the side file's
	 * DWARF as inlined subroutines. The jitdump and perf-PID.map
	 * fallbacks have no place for it.
	 */
	const struct perfjit_inline *inlines;
	size_t nr_inlines;
};

/* The size of struct perfjit_code before perfjit_code::inlines (libperfjit 0.1). */
#define PERFJIT_CODE_SIZE_VER0 offsetof(struct perfjit_code, inlines)

typedef struct perfjit_session perfjit_session;

/* @opts may be NULL for the defaults. */
PERFJIT_API int perfjit_open(const struct perfjit_options *opts, perfjit_session **session);
/* Announce code that was just made executable. */
PERFJIT_API int perfjit_load(perfjit_session *session, const struct perfjit_code *code);
/*
 * Announce @n pieces of code at once: a module, a class, a burst of
 * compiles. With code regions they share one side file, so the recording
 * costs one file write, and perf report one file to open, instead of @n;
 * perfjit_load() of each shares the library's open pack, written with the
 * loads around it (without the library's thread, one file each). Each
 * stays a region of its own
 * for unload and move. The batch loads as a whole: on an error none of it is
 * loaded (a perf-PID.map or jitdump fallback file may keep lines for its
 * first pieces, which the next attempt repeats harmlessly).
 */
PERFJIT_API int perfjit_load_many(perfjit_session *session, const struct perfjit_code *const *codes,
				  size_t n);
/* Announce that the code loaded at @addr was freed. */
PERFJIT_API int perfjit_unload(perfjit_session *session, const void *addr);
/* Announce that the code loaded at @from now runs at @to (already copied). */
PERFJIT_API int perfjit_move(perfjit_session *session, const void *from, const void *to);
/*
 * Announce all live code again, marked as live before (a rundown), then
 * store the side files it needs: for a recorder that started after the
 * code was loaded. The library's thread does this by itself when the kernel says a
 * recorder asked; call it with PERFJIT_OPEN_NO_THREAD, or after loading,
 * once asked, code that had run before (perfjit_options::on_asked). Code
 * loaded or unloaded meanwhile is announced in order. 0 also when nobody
 * records. From the first rundown on, loads and unloads are announced as
 * they come and perfjit_asked() is 1, whether or not anybody records: a
 * runtime calls it once a recorder asked. -ESTALE (since 1.0) when a side
 * file of live code, whose copy the library no longer keeps, was removed
 * despite its pin (see max_dir_bytes): once per file, and told to the log.
 */
PERFJIT_API int perfjit_rundown(perfjit_session *session);
/*
 * A descriptor that becomes readable (POLLIN) when a recorder asks for the
 * process's code, or -EOPNOTSUPP outside the code-region mode. One per
 * process: every session returns the same. perfjit_rundown() clears it.
 */
PERFJIT_API int perfjit_rundown_fd(perfjit_session *session);
/* Unloads nothing; flushes and frees. NULL is allowed. */
PERFJIT_API void perfjit_close(perfjit_session *session);

/* The mode in use: CODE_REGION, PERF_MAP or JITDUMP. */
PERFJIT_API int perfjit_mode(const perfjit_session *session);
/*
 * 1 when the library wants the runtime's code as it comes: a recorder has
 * asked for the process's code (code regions), or the mode writes a file
 * (perf-PID.map, jitdump) that nobody can ask for later. 0 before a
 * recorder asks. See perfjit_options::on_asked. Since libperfjit 0.4.
 */
PERFJIT_API int perfjit_asked(perfjit_session *session);
/*
 * The build-id (20 bytes) of the side file of the code loaded at @addr.
 * -ENODATA in the PERF_MAP and JITDUMP modes, which write no side file
 * (since libperfjit 1.0; before, a hash that no file carried).
 */
PERFJIT_API int perfjit_build_id(perfjit_session *session, const void *addr, uint8_t build_id[20]);
/*
 * The side file of the code loaded at @addr, once stored (this waits for
 * the library's thread): copied to @path. -ENODATA if nobody recorded the
 * code; the error of the write if the file could not be stored (a load
 * does not wait for the write, so it cannot report it).
 */
PERFJIT_API int perfjit_side_file(perfjit_session *session, const void *addr, char *path,
				  size_t size);
PERFJIT_API const char *perfjit_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* PERFJIT_H */
