// SPDX-License-Identifier: GPL-2.0
// announce: what announcing one JIT code region costs the runtime, through
// libperfjit, in each way it can announce.
//
//   announce [--functions N] [--rounds R] [--batch K] [--modes LIST] [--out CSV]
//
// Modes (run interleaved, R rounds; each round of each mode gets fresh code):
//   code-region-rec   PERFJIT_MODE_CODE_REGION while this process records
//                     itself with a dummy event with mmap3 and code_regions
//                     that asked for its code (a rundown request, so that
//                     libperfjit announces each load; side files are
//                     written into a temporary PERF_BUILDID_DIR); the ring
//                     buffer is drained between timed batches
//   code-region-rec-many  the same, announced 64 at a time with
//                     perfjit_load_many(): one side file per 64 functions
//   code-region-idle  PERFJIT_MODE_CODE_REGION, nobody records or ever
//                     asked: libperfjit keeps the code and makes no system
//                     call
//   perf-map          PERFJIT_MODE_PERF_MAP: /tmp/perf-PID.map lines
//   jitdump           PERFJIT_MODE_JITDUMP into a temporary directory
// The workload: N functions of 16 bytes in one RWX mapping, each with its own
// code bytes (mov eax, imm32; ret; int3 padding), named bench_fn_<i>.
// Loading each function is timed (ns/announce), then perfjit_unload of each.
// Modes this kernel lacks (code regions on a kernel without the prctl) are
// reported on stderr and skipped.
//
// CSV: round,mode,functions,load_ns,unload_ns,records,lost,side_files
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <ftw.h>
#include <linux/perf_event.h>
#include <string>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

#include <perfjit.h>

#include "bench.h"

namespace {

constexpr uint32_t kRecordMmap3 = 23;
constexpr uint16_t kMmap3CodeRegion = 1;
constexpr size_t kRbPages = 256;
constexpr size_t kFnSize = 16;
// PERF_EVENT_IOC_CODE_REGION_RUNDOWN of the patched kernel.
const unsigned long kIocCodeRegionRundown = _IO('$', 12);

enum Mode { CR_REC, CR_REC_MANY, CR_IDLE, PERF_MAP, JITDUMP, NR_MODES };
const char *const mode_names[NR_MODES] = { "code-region-rec", "code-region-rec-many",
					   "code-region-idle", "perf-map", "jitdump" };
constexpr size_t kGroup = 64; // functions per perfjit_load_many() in CR_REC_MANY

// A PERF_COUNT_SW_DUMMY event with mmap3 and code_regions on this process,
// with a ring buffer.
struct Recorder {
	int fd = -1;
	unsigned char *base = nullptr;
	size_t page = 0, size = 0;
	uint64_t code_regions = 0, lost = 0;

	int open()
	{
		perf_event_attr attr;

		bench_attr_init(&attr);
		// mmap3, and code_regions: the kernel gives code regions to
		// recorders that ask for them only.
		bench_attr_set(&attr, BENCH_ATTR_BIT_MMAP3);
		bench_attr_set(&attr, BENCH_ATTR_BIT_CODE_REGIONS);
		fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
		if (fd < 0)
			return -errno;
		page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
		size = kRbPages * page;
		void *p = mmap(nullptr, size + page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			const int err = -errno;
			::close(fd);
			fd = -1;
			return err;
		}
		base = static_cast<unsigned char *>(p);
		return 0;
	}

	void drain()
	{
		if (fd < 0)
			return;
		auto *pg = reinterpret_cast<perf_event_mmap_page *>(base);
		const unsigned char *data = base + page;
		const uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
		uint64_t tail = pg->data_tail;

		while (tail < head) {
			unsigned char rec[128];
			perf_event_header h;
			const size_t off = tail % size;
			// The header and what we read of the record, across the wrap.
			const size_t want = sizeof(rec);
			for (size_t i = 0; i < want && tail + i < head; i++)
				rec[i] = data[(off + i) % size];
			memcpy(&h, rec, sizeof(h));
			if (h.size < sizeof(h) || tail + h.size > head)
				break;
			if (h.type == PERF_RECORD_LOST) {
				uint64_t n;
				memcpy(&n, rec + 16, sizeof(n));
				lost += n;
			} else if (h.type == kRecordMmap3 && h.size >= 80) {
				uint16_t fl;
				memcpy(&fl, rec + 72, sizeof(fl));
				code_regions += (fl & kMmap3CodeRegion) != 0;
			}
			tail += h.size;
		}
		__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
	}

	void close()
	{
		if (fd < 0)
			return;
		drain();
		munmap(base, size + page);
		::close(fd);
		fd = -1;
	}
};

int rm_one(const char *path, const struct stat *, int, struct FTW *)
{
	remove(path);
	return 0;
}

void rm_rf(const std::string &path)
{
	nftw(path.c_str(), rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

size_t count_files(const std::string &dir)
{
	static size_t n;
	n = 0;
	nftw(
		dir.c_str(),
		[](const char *, const struct stat *, int type, struct FTW *) {
			n += type == FTW_F;
			return 0;
		},
		16, FTW_PHYS);
	return n;
}

uint32_t g_imm = 1;

struct Result {
	bool ok = false;
	double load_ns = 0, unload_ns = 0;
	uint64_t records = 0, lost = 0;
	size_t side_files = 0;
};

Result run(Mode mode, size_t n, size_t batch, const std::string &tmp, bool quiet)
{
	Result res;
	Recorder rec;
	const size_t len = n * kFnSize;
	auto *code = static_cast<unsigned char *>(
		mmap(nullptr, len, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	if (code == MAP_FAILED) {
		perror("announce: mmap");
		exit(1);
	}
	std::vector<std::string> names(n);
	for (size_t i = 0; i < n; i++) {
		unsigned char *f = code + i * kFnSize;
		const uint32_t imm = g_imm++;
		memset(f, 0xcc, kFnSize);
		f[0] = 0xb8; // mov eax, imm32
		memcpy(f + 1, &imm, 4);
		f[5] = 0xc3; // ret
		names[i] = "bench_fn_" + std::to_string(i);
	}

	const std::string bdir = tmp + "/buildid", jdir = tmp + "/jit";
	perfjit_options opts{};
	opts.size = sizeof(opts);
	opts.buildid_dir = bdir.c_str();
	opts.jitdump_dir = jdir.c_str();
	switch (mode) {
	case CR_REC:
	case CR_REC_MANY:
	case CR_IDLE:
		opts.mode = PERFJIT_MODE_CODE_REGION;
		break;
	case PERF_MAP:
		opts.mode = PERFJIT_MODE_PERF_MAP;
		break;
	default:
		opts.mode = PERFJIT_MODE_JITDUMP;
		break;
	}
	if (mode == CR_REC || mode == CR_REC_MANY) {
		const int err = rec.open();
		if (err) {
			if (!quiet)
				fprintf(stderr, "announce: %s: no mmap3 event here: %s\n", mode_names[mode],
					strerror(-err));
			munmap(code, len);
			return res;
		}
	}
	perfjit_session *s = nullptr;
	int err = perfjit_open(&opts, &s);
	if (err) {
		if (!quiet)
			fprintf(stderr, "announce: %s: perfjit_open: %s\n", mode_names[mode],
				perfjit_strerror(err));
		rec.close();
		munmap(code, len);
		return res;
	}

	// A recorder that wants the code asks for it: from then on libperfjit
	// announces each load. The request signals the library's thread;
	// perfjit_rundown() makes the start certain before the timing.
	if (rec.fd >= 0) {
		if (ioctl(rec.fd, kIocCodeRegionRundown, 0) && !quiet)
			fprintf(stderr, "announce: %s: rundown request: %s\n", mode_names[mode],
				strerror(errno));
		err = perfjit_rundown(s);
		if (err) {
			fprintf(stderr, "announce: %s: perfjit_rundown: %s\n", mode_names[mode],
				perfjit_strerror(err));
			exit(1);
		}
	}

	uint64_t total = 0;
	for (size_t done = 0; done < n;) {
		const size_t k = std::min(batch, n - done);
		const size_t group = mode == CR_REC_MANY ? kGroup : 1;
		std::vector<perfjit_code> codes(group);
		std::vector<const perfjit_code *> ptrs(group);
		const uint64_t t0 = bench_now_ns();
		for (size_t i = done; i < done + k; i += group) {
			const size_t g = std::min(group, done + k - i);
			for (size_t j = 0; j < g; j++) {
				perfjit_code &c = codes[j];
				c = perfjit_code{};
				c.size = sizeof(c);
				c.name = names[i + j].c_str();
				c.addr = code + (i + j) * kFnSize;
				c.len = 6;
				ptrs[j] = &c;
			}
			err = perfjit_load_many(s, ptrs.data(), g);
			if (err) {
				fprintf(stderr, "announce: %s: perfjit_load: %s\n", mode_names[mode],
					perfjit_strerror(err));
				exit(1);
			}
		}
		total += bench_now_ns() - t0;
		done += k;
		rec.drain();
	}
	res.load_ns = static_cast<double>(total) / static_cast<double>(n);

	total = 0;
	for (size_t done = 0; done < n;) {
		const size_t k = std::min(batch, n - done);
		const uint64_t t0 = bench_now_ns();
		for (size_t i = done; i < done + k; i++) {
			err = perfjit_unload(s, code + i * kFnSize);
			if (err) {
				fprintf(stderr, "announce: %s: perfjit_unload: %s\n", mode_names[mode],
					perfjit_strerror(err));
				exit(1);
			}
		}
		total += bench_now_ns() - t0;
		done += k;
		rec.drain();
	}
	res.unload_ns = static_cast<double>(total) / static_cast<double>(n);

	perfjit_close(s);
	rec.close();
	munmap(code, len);
	res.ok = true;
	res.records = rec.code_regions;
	res.lost = rec.lost;
	res.side_files = count_files(bdir);
	rm_rf(bdir);
	rm_rf(jdir);
	return res;
}

[[noreturn]] void usage()
{
	fprintf(stderr, "usage: announce [--functions N] [--rounds R] [--batch K] "
			"[--modes code-region-rec,code-region-rec-many,code-region-idle,perf-map,jitdump] "
			"[--out CSV]\n");
	exit(2);
}

} // namespace

int main(int argc, char **argv)
{
	size_t n = 10000, rounds = 5, batch = 500;
	bool modes[NR_MODES] = { true, true, true, true, true };
	const char *out_path = nullptr;

	for (int i = 1; i < argc; i++) {
		const std::string a = argv[i];
		if (i + 1 >= argc)
			usage();
		const std::string v = argv[++i];
		if (a == "--functions")
			n = std::stoul(v);
		else if (a == "--rounds")
			rounds = std::stoul(v);
		else if (a == "--batch")
			batch = std::max<size_t>(1, std::stoul(v));
		else if (a == "--out")
			out_path = argv[i];
		else if (a == "--modes") {
			for (auto &m : modes)
				m = false;
			size_t pos = 0;
			while (pos <= v.size()) {
				const size_t comma = std::min(v.find(',', pos), v.size());
				const std::string tok = v.substr(pos, comma - pos);
				int m = 0;
				while (m < NR_MODES && tok != mode_names[m])
					m++;
				if (m == NR_MODES)
					usage();
				modes[m] = true;
				pos = comma + 1;
			}
		} else
			usage();
	}
	if (!n)
		usage();

	const char *tmpdir = getenv("TMPDIR");
	std::string base = std::string(tmpdir && tmpdir[0] ? tmpdir : "/tmp") + "/announce-bench.XXXXXX";
	std::vector<char> buf(base.begin(), base.end());
	buf.push_back('\0');
	if (!mkdtemp(buf.data())) {
		perror("announce: mkdtemp");
		return 1;
	}
	const std::string tmp = buf.data();

	FILE *out = out_path ? fopen(out_path, "w") : stdout;
	if (!out) {
		perror(out_path);
		return 1;
	}
	// Probe, and warm up the library and the page cache.
	bool ok[NR_MODES];
	for (int m = 0; m < NR_MODES; m++)
		ok[m] = modes[m] && run(static_cast<Mode>(m), std::min<size_t>(n, 200), batch, tmp, false).ok;

	fprintf(out, "round,mode,functions,load_ns,unload_ns,records,lost,side_files\n");
	for (size_t r = 1; r <= rounds; r++) {
		for (int m = 0; m < NR_MODES; m++) {
			if (!ok[m])
				continue;
			const Result res = run(static_cast<Mode>(m), n, batch, tmp, false);
			if (!res.ok)
				continue;
			fprintf(out, "%zu,%s,%zu,%.1f,%.1f,%llu,%llu,%zu\n", r, mode_names[m], n, res.load_ns,
				res.unload_ns, static_cast<unsigned long long>(res.records),
				static_cast<unsigned long long>(res.lost), res.side_files);
			fflush(out);
		}
	}
	if (out != stdout)
		fclose(out);
	// The perf-map fallback appended to /tmp/perf-<pid>.map.
	unlink(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str());
	rm_rf(tmp);
	return 0;
}
