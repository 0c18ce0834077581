// SPDX-License-Identifier: GPL-2.0
/*
 * failmalloc: an LD_PRELOAD allocation-failure injector for one program's
 * functions of interest (tests/vm/perf-enomem drives perf's code-region
 * handling through it).
 *
 *   FAILMALLOC_FUNCS=f1,f2,...  the functions: an allocation counts when one
 *                               of them is on the stack (backtrace()). They
 *                               are looked up once, at start, in the ELF
 *                               symbol table of /proc/self/exe (with the
 *                               PIE load bias); a GCC clone (f.part.0,
 *                               f.isra.0, ...) counts as f. A function that
 *                               the compiler inlined everywhere has no
 *                               symbol: it is listed as missing in the
 *                               report, and its allocations count under the
 *                               function it was inlined into.
 *   FAILMALLOC_NTH=N            fail the Nth counted allocation (1-based),
 *                               and only that one: NULL with errno ENOMEM.
 *                               0 or unset: fail none, count only.
 *   FAILMALLOC_REPORT=FILE      written at exit (by the process that loaded
 *                               the shim, when it has a function of
 *                               interest): the count, whether one failed,
 *                               the call chain of the failed one, and each
 *                               distinct call chain of the counted
 *                               allocations with its count and the number
 *                               of its first allocation.
 *
 * Interposes malloc, calloc, realloc, strdup, strndup, posix_memalign,
 * aligned_alloc, memalign and free. dlsym(RTLD_NEXT) finds the real ones;
 * while it runs, allocations come from a static bootstrap buffer that free()
 * ignores. A thread-local flag keeps the shim's own allocations (libelf,
 * backtrace(), the report) out of the count.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FRAMES	128
#define CHAIN_FRAMES	24
#define MAX_CHAINS	4096

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);

/* Allocations while dlsym() resolves the real functions. */
static char bootstrap[16384] __attribute__((aligned(64)));
static size_t bootstrap_used;
static int resolving;

static __thread int in_shim __attribute__((tls_model("initial-exec")));

struct range {
	uintptr_t start, end;	/* run-time addresses */
	const char *name;
};

/* Every function symbol of the executable, sorted, to name call chains. */
struct fsym {
	uintptr_t start, end;
	char *name;
};

struct chain {
	unsigned int nr;
	uintptr_t pc[CHAIN_FRAMES];	/* return addresses in the executable */
	unsigned long count, first;
};

static int active;		/* a function of interest resolved */
static pid_t owner;
static long nth;
static const char *report_path;
static struct range *ranges;
static size_t nr_ranges;
static struct fsym *fsyms;
static size_t nr_fsyms;
static uintptr_t exe_bias, exe_lo, exe_hi;
static char *missing;		/* the functions with no symbol */
static unsigned long matched, failed_at;
static struct chain *chains;	/* real_calloc'ed */
static size_t nr_chains;
static struct chain failed_chain;
static int failed;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void resolve(void)
{
	if (real_malloc)
		return;
	resolving = 1;
	real_calloc = dlsym(RTLD_NEXT, "calloc");
	real_realloc = dlsym(RTLD_NEXT, "realloc");
	real_free = dlsym(RTLD_NEXT, "free");
	real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	real_memalign = dlsym(RTLD_NEXT, "memalign");
	real_malloc = dlsym(RTLD_NEXT, "malloc");
	resolving = 0;
}

static void *bootstrap_alloc(size_t size)
{
	size_t at = (bootstrap_used + 15) & ~(size_t)15;

	if (at + size > sizeof(bootstrap))
		return NULL;
	bootstrap_used = at + size;
	memset(bootstrap + at, 0, size);
	return bootstrap + at;
}

static int in_bootstrap(const void *p)
{
	return (const char *)p >= bootstrap && (const char *)p < bootstrap + sizeof(bootstrap);
}

static int main_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	/* The first object is the executable. */
	exe_bias = info->dlpi_addr;
	exe_lo = UINTPTR_MAX;
	exe_hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		if (info->dlpi_addr + ph->p_vaddr < exe_lo)
			exe_lo = info->dlpi_addr + ph->p_vaddr;
		if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > exe_hi)
			exe_hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	return 1;
}

/* Whether symbol @sym is function @fn or a GCC clone of it (fn.part.0). */
static int same_function(const char *sym, const char *fn, size_t len)
{
	return !strncmp(sym, fn, len) && (sym[len] == '\0' || sym[len] == '.');
}

static int fsym_cmp(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static void load_symbols(const char *funcs)
{
	char *list = strdup(funcs), *save, *fn;
	size_t nr_funcs = 0, *found;
	Elf_Scn *scn = NULL, *symtab = NULL, *dynsym = NULL;
	Elf *elf;
	int fd;

	dl_iterate_phdr(main_object, NULL);
	elf_version(EV_CURRENT);
	fd = open("/proc/self/exe", O_RDONLY);
	if (fd < 0)
		return;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	while (elf && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			symtab = scn;
		else if (sh.sh_type == SHT_DYNSYM)
			dynsym = scn;
	}
	if (!symtab)
		symtab = dynsym;
	for (fn = strtok_r(list, ",", &save); fn; fn = strtok_r(NULL, ",", &save))
		nr_funcs++;
	found = calloc(nr_funcs + 1, sizeof(*found));
	if (symtab) {
		GElf_Shdr sh;
		Elf_Data *data = elf_getdata(symtab, NULL);
		size_t n;

		gelf_getshdr(symtab, &sh);
		n = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
		fsyms = calloc(n + 1, sizeof(*fsyms));
		ranges = calloc(n + 1, sizeof(*ranges));
		for (size_t i = 0; data && i < n; i++) {
			GElf_Sym sym;
			const char *name;
			size_t k = 0;

			if (!gelf_getsym(data, i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
			    sym.st_shndx == SHN_UNDEF || !sym.st_size)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name)
				continue;
			fsyms[nr_fsyms].start = exe_bias + sym.st_value;
			fsyms[nr_fsyms].end = exe_bias + sym.st_value + sym.st_size;
			fsyms[nr_fsyms].name = strdup(name);
			/* The list is NUL-separated now: walk it. */
			fn = list;
			for (k = 0; k < nr_funcs; k++, fn += strlen(fn) + 1) {
				while (*fn == '\0')
					fn++;
				if (!same_function(name, fn, strlen(fn)))
					continue;
				ranges[nr_ranges].start = fsyms[nr_fsyms].start;
				ranges[nr_ranges].end = fsyms[nr_fsyms].end;
				ranges[nr_ranges].name = fsyms[nr_fsyms].name;
				nr_ranges++;
				found[k] = 1;
			}
			nr_fsyms++;
		}
		qsort(fsyms, nr_fsyms, sizeof(*fsyms), fsym_cmp);
	}
	/* The functions of interest that have no symbol. */
	{
		size_t len = 1;
		char *p;

		fn = list;
		for (size_t k = 0; k < nr_funcs; k++, fn += strlen(fn) + 1) {
			while (*fn == '\0')
				fn++;
			len += strlen(fn) + 1;
		}
		missing = calloc(1, len);
		p = missing;
		fn = list;
		for (size_t k = 0; k < nr_funcs; k++, fn += strlen(fn) + 1) {
			while (*fn == '\0')
				fn++;
			if (!found[k])
				p += sprintf(p, "%s%s", p == missing ? "" : ",", fn);
		}
	}
	free(found);
	if (elf)
		elf_end(elf);
	close(fd);
	/* list is kept: the names point into fsyms, not into it */
	free(list);
}

static const char *symbolize(uintptr_t pc, uintptr_t *off)
{
	size_t lo = 0, hi = nr_fsyms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (fsyms[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && pc < fsyms[lo - 1].end) {
		*off = pc - fsyms[lo - 1].start;
		return fsyms[lo - 1].name;
	}
	*off = pc - exe_bias;
	return NULL;
}

static void print_chain(FILE *f, const struct chain *c)
{
	for (unsigned int i = 0; i < c->nr; i++) {
		uintptr_t off;
		const char *name = symbolize(c->pc[i], &off);

		if (name)
			fprintf(f, "%s%s+0x%lx", i ? " <- " : "", name, (unsigned long)off);
		else
			fprintf(f, "%sexe+0x%lx", i ? " <- " : "", (unsigned long)off);
	}
}

static void write_report(void)
{
	FILE *f;

	if (!active || !report_path || getpid() != owner)
		return;
	in_shim = 1;
	f = fopen(report_path, "w");
	if (!f)
		return;
	pthread_mutex_lock(&lock);
	fprintf(f, "matched %lu\n", matched);
	fprintf(f, "nth %ld\n", nth);
	fprintf(f, "failed %d\n", failed);
	if (failed)
		fprintf(f, "failed-at %lu\n", failed_at);
	fprintf(f, "ranges %zu\n", nr_ranges);
	fprintf(f, "missing %s\n", missing && *missing ? missing : "-");
	if (failed) {
		fprintf(f, "failed-chain ");
		print_chain(f, &failed_chain);
		fprintf(f, "\n");
	}
	for (size_t i = 0; i < nr_chains; i++) {
		fprintf(f, "chain %lu %lu ", chains[i].first, chains[i].count);
		print_chain(f, &chains[i]);
		fprintf(f, "\n");
	}
	pthread_mutex_unlock(&lock);
	fclose(f);
}

/* A child that forked counts nothing (and writes no report). */
static void child_off(void)
{
	active = 0;
}

__attribute__((constructor)) static void failmalloc_init(void)
{
	const char *funcs = getenv("FAILMALLOC_FUNCS");
	const char *s = getenv("FAILMALLOC_NTH");
	void *bt[4];

	resolve();
	in_shim = 1;
	/* backtrace() loads libgcc_s on its first call: not in a hook. */
	backtrace(bt, 4);
	if (funcs && *funcs) {
		nth = s ? strtol(s, NULL, 10) : 0;
		report_path = getenv("FAILMALLOC_REPORT");
		owner = getpid();
		load_symbols(funcs);
		chains = real_calloc(MAX_CHAINS, sizeof(*chains));
		if (nr_ranges && chains) {
			atexit(write_report);
			pthread_atfork(NULL, NULL, child_off);
			__atomic_store_n(&active, 1, __ATOMIC_RELEASE);
		}
	}
	in_shim = 0;
}

static int in_ranges(uintptr_t pc)
{
	for (size_t i = 0; i < nr_ranges; i++)
		if (pc >= ranges[i].start && pc < ranges[i].end)
			return 1;
	return 0;
}

/* Counts an allocation made under a function of interest: fail it? */
static int should_fail(void)
{
	void *bt[MAX_FRAMES];
	struct chain c = { 0 };
	int n, outer = -1, fail = 0;

	if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE) || in_shim)
		return 0;
	in_shim = 1;
	n = backtrace(bt, MAX_FRAMES);
	/* A return address: the call is the byte before it. */
	for (int i = 0; i < n; i++)
		if (in_ranges((uintptr_t)bt[i] - 1))
			outer = i;
	if (outer < 0) {
		in_shim = 0;
		return 0;
	}
	/* The chain: the executable's frames up to the outermost function of
	 * interest and its caller. */
	for (int i = 0; i < n && i <= outer + 1 && c.nr < CHAIN_FRAMES; i++) {
		uintptr_t pc = (uintptr_t)bt[i] - 1;

		if (pc >= exe_lo && pc < exe_hi)
			c.pc[c.nr++] = pc;
	}

	pthread_mutex_lock(&lock);
	matched++;
	if (nth > 0 && (unsigned long)nth == matched) {
		fail = 1;
		failed = 1;
		failed_at = matched;
		failed_chain = c;
	}
	{
		size_t i;

		for (i = 0; i < nr_chains; i++)
			if (chains[i].nr == c.nr &&
			    !memcmp(chains[i].pc, c.pc, c.nr * sizeof(c.pc[0])))
				break;
		if (i == nr_chains && nr_chains < MAX_CHAINS) {
			c.first = matched;
			chains[nr_chains++] = c;
		}
		if (i < nr_chains)
			chains[i].count++;
	}
	pthread_mutex_unlock(&lock);
	in_shim = 0;
	if (fail) {
		/* Now, and again at exit: the program may not get there. */
		write_report();
		in_shim = 0;
		errno = ENOMEM;
	}
	return fail;
}

void *malloc(size_t size)
{
	if (!real_malloc) {
		if (resolving)
			return bootstrap_alloc(size);
		resolve();
	}
	if (should_fail())
		return NULL;
	return real_malloc(size);
}

void *calloc(size_t nmemb, size_t size)
{
	if (!real_malloc) {
		if (resolving) {
			if (size && nmemb > SIZE_MAX / size)
				return NULL;
			return bootstrap_alloc(nmemb * size);
		}
		resolve();
	}
	if (should_fail())
		return NULL;
	return real_calloc(nmemb, size);
}

void *realloc(void *ptr, size_t size)
{
	if (!real_malloc)
		resolve();
	if (in_bootstrap(ptr)) {
		void *p = malloc(size);

		/* The bootstrap buffer ends after ptr: copy what is there. */
		if (p) {
			size_t avail = bootstrap + sizeof(bootstrap) - (char *)ptr;

			memcpy(p, ptr, size < avail ? size : avail);
		}
		return p;
	}
	/* realloc(p, 0) frees. */
	if ((size || !ptr) && should_fail())
		return NULL;
	return real_realloc(ptr, size);
}

void free(void *ptr)
{
	if (!ptr || in_bootstrap(ptr))
		return;
	if (!real_free)
		resolve();
	real_free(ptr);
}

char *strdup(const char *s)
{
	size_t len = strlen(s) + 1;
	char *p = malloc(len);

	if (p)
		memcpy(p, s, len);
	return p;
}

char *strndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = malloc(len + 1);

	if (p) {
		memcpy(p, s, len);
		p[len] = '\0';
	}
	return p;
}

int posix_memalign(void **memptr, size_t alignment, size_t size)
{
	if (!real_malloc)
		resolve();
	if (should_fail())
		return ENOMEM;
	return real_posix_memalign(memptr, alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size)
{
	if (!real_malloc)
		resolve();
	if (should_fail())
		return NULL;
	return real_aligned_alloc(alignment, size);
}

void *memalign(size_t alignment, size_t size)
{
	if (!real_malloc)
		resolve();
	if (should_fail())
		return NULL;
	return real_memalign(alignment, size);
}
