// SPDX-License-Identifier: LGPL-2.1-or-later
#include "fallback.hpp"

#include "elf_host.hpp"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <ctime>
#include <elf.h>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <vector>

namespace perfjit
{

uint64_t monotonic_ns()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + ts.tv_nsec;
}

int PerfMap::open(const std::string &dir)
{
	path_ = dir + "/perf-" + std::to_string(getpid()) + ".map";
	file_.reset(fopen(path_.c_str(), "ae"));
	return file_ ? 0 : -errno;
}

int PerfMap::load(uint64_t addr, uint64_t len, const std::string &name)
{
	if (!file_)
		return -EBADF;
	// One line at a time, flushed: perf reads the file after the process
	// may have died.
	if (fprintf(file_.get(), "%" PRIx64 " %" PRIx64 " %s\n", addr, len, name.c_str()) < 0 ||
	    fflush(file_.get()))
		return errno ? -errno : -EIO;
	return 0;
}

namespace
{

constexpr uint32_t kJitdumpMagic = 0x4A695444; // "JiTD"

enum : uint32_t {
	JIT_CODE_LOAD = 0,
	JIT_CODE_MOVE = 1,
	JIT_CODE_DEBUG_INFO = 2,
	JIT_CODE_CLOSE = 3,
	JIT_CODE_UNWINDING_INFO = 4,
};

struct JitHeader {
	uint32_t magic;
	uint32_t version;
	uint32_t total_size;
	uint32_t elf_mach;
	uint32_t pad1;
	uint32_t pid;
	uint64_t timestamp;
	uint64_t flags;
};

struct JitRecordHeader {
	uint32_t id;
	uint32_t total_size;
	uint64_t timestamp;
};

struct JitCodeLoad {
	JitRecordHeader p;
	uint32_t pid;
	uint32_t tid;
	uint64_t vma;
	uint64_t code_addr;
	uint64_t code_size;
	uint64_t code_index;
};

struct JitCodeMove {
	JitRecordHeader p;
	uint32_t pid;
	uint32_t tid;
	uint64_t vma;
	uint64_t old_code_addr;
	uint64_t new_code_addr;
	uint64_t code_size;
	uint64_t code_index;
};

struct JitCodeDebugInfo {
	JitRecordHeader p;
	uint64_t code_addr;
	uint64_t nr_entry;
};

// Followed by the unwinding data: .eh_frame, then .eh_frame_hdr, padded to 8.
struct JitCodeUnwindingInfo {
	JitRecordHeader p;
	uint64_t unwinding_size;
	uint64_t eh_frame_hdr_size;
	uint64_t mapped_size;
};

uint32_t gettid32()
{
	return static_cast<uint32_t>(syscall(SYS_gettid));
}

} // namespace

struct JitdumpFile {
	std::mutex lock; // a load's records together, and code_index
	UniqueFd fd;
	void *marker = nullptr;
	size_t marker_len = 0;
	uint64_t code_index = 0;
	pid_t owner = 0;
	std::string path;

	JitdumpFile() = default;
	JitdumpFile(const JitdumpFile &) = delete;
	JitdumpFile &operator=(const JitdumpFile &) = delete;
	~JitdumpFile();

	int create();
	int write_record(const void *rec, size_t len, const void *tail = nullptr,
			 size_t tail_len = 0);
	int write_debug_info(uint64_t addr, const CodeImage &image);
	int write_unwinding_info(const CodeImage &image);
};

namespace
{

// The jitdump files of the process, by path, while a session has one.
std::mutex g_jitdump_lock;
std::map<std::string, std::weak_ptr<JitdumpFile>> g_jitdumps;

} // namespace

JitdumpFile::~JitdumpFile()
{
	// A child of fork() that drops its parent's file writes nothing to it.
	if (fd && owner == getpid()) {
		JitRecordHeader rec{JIT_CODE_CLOSE, sizeof(JitRecordHeader), monotonic_ns()};

		write_record(&rec, sizeof(rec));
	}
	if (marker)
		munmap(marker, marker_len);
}

int JitdumpFile::create()
{
	owner = getpid();
	fd.reset(::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644));
	if (!fd)
		return -errno;

	JitHeader h{};
	h.magic = kJitdumpMagic;
	h.version = 1;
	h.total_size = sizeof(h);
	h.elf_mach = host::kElfMachine;
	h.pid = owner;
	h.timestamp = monotonic_ns();
	const int err = write_record(&h, sizeof(h));
	if (err)
		return err;

	// The marker perf record sees as an MMAP of this file.
	marker_len = sysconf(_SC_PAGESIZE);
	marker = mmap(nullptr, marker_len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd.get(), 0);
	if (marker == MAP_FAILED) {
		marker = nullptr;
		return -errno;
	}
	return 0;
}

int Jitdump::open(const std::string &dir)
{
	int err = mkdir_p(dir);

	if (err)
		return err;
	const std::string path = dir + "/jit-" + std::to_string(getpid()) + ".dump";
	std::lock_guard<std::mutex> guard(g_jitdump_lock);
	// A child of fork() has its own path: its parent's entry goes.
	for (auto it = g_jitdumps.begin(); it != g_jitdumps.end();) {
		auto file = it->second.lock();
		it = file && file->owner == getpid() ? std::next(it) : g_jitdumps.erase(it);
	}
	std::shared_ptr<JitdumpFile> file = g_jitdumps[path].lock();
	if (!file) {
		file = std::make_shared<JitdumpFile>();
		file->path = path;
		err = file->create();
		if (err) {
			g_jitdumps.erase(path);
			return err;
		}
		g_jitdumps[path] = file;
	}
	file_ = std::move(file);
	return 0;
}

void Jitdump::close()
{
	file_.reset();
}

const std::string &Jitdump::path() const
{
	static const std::string none;

	return file_ ? file_->path : none;
}

int JitdumpFile::write_record(const void *rec, size_t len, const void *tail, size_t tail_len)
{
	std::vector<uint8_t> buf(static_cast<const uint8_t *>(rec),
				 static_cast<const uint8_t *>(rec) + len);

	if (tail_len)
		buf.insert(buf.end(), static_cast<const uint8_t *>(tail),
			   static_cast<const uint8_t *>(tail) + tail_len);
	const ssize_t n = write(fd.get(), buf.data(), buf.size());

	if (n < 0)
		return -errno;
	if (static_cast<size_t>(n) == buf.size())
		return 0;
	// A record cut short (a full disk) would make every later record
	// unreadable: take its first part back.
	const off_t end = lseek(fd.get(), 0, SEEK_CUR);
	if (end >= n && ftruncate(fd.get(), end - n) == 0)
		lseek(fd.get(), end - n, SEEK_SET);
	return -ENOSPC;
}

int JitdumpFile::write_debug_info(uint64_t addr, const CodeImage &image)
{
	std::vector<uint8_t> entries;

	for (const auto &row : image.lines) {
		const uint64_t entry_addr = addr + row.offset;
		const int32_t lineno = static_cast<int32_t>(row.line);
		const int32_t discrim = 0;
		const auto put = [&entries](const void *p, size_t n) {
			entries.insert(entries.end(), static_cast<const uint8_t *>(p),
				       static_cast<const uint8_t *>(p) + n);
		};

		put(&entry_addr, sizeof(entry_addr));
		put(&lineno, sizeof(lineno));
		put(&discrim, sizeof(discrim));
		put(image.source_file.c_str(), image.source_file.size() + 1);
	}

	JitCodeDebugInfo rec{};
	rec.p.id = JIT_CODE_DEBUG_INFO;
	rec.p.total_size = sizeof(rec) + entries.size();
	rec.p.timestamp = monotonic_ns();
	rec.code_addr = addr;
	rec.nr_entry = image.lines.size();
	return write_record(&rec, sizeof(rec), entries.data(), entries.size());
}

// perf inject --jit places the .eh_frame at the first 8-byte aligned
// address after the code, as libperfjit's side files do, and the header
// right after it; the header is made for that place. Applies to the next
// code load. A table it cannot index goes without, as in a side file.
int JitdumpFile::write_unwinding_info(const CodeImage &image)
{
	const uint64_t eh_addr = (image.code.size() + 7) & ~uint64_t{7};
	const uint64_t hdr_addr = eh_addr + image.eh_frame.size();
	const std::vector<uint8_t> hdr = make_eh_frame_hdr(image.eh_frame, eh_addr, hdr_addr);

	if (hdr.empty())
		return 0;
	std::vector<uint8_t> data(image.eh_frame);
	data.insert(data.end(), hdr.begin(), hdr.end());
	const size_t unwinding_size = data.size();
	data.resize((data.size() + 7) & ~size_t{7}, 0);

	JitCodeUnwindingInfo rec{};
	rec.p.id = JIT_CODE_UNWINDING_INFO;
	rec.p.total_size = sizeof(rec) + data.size();
	rec.p.timestamp = monotonic_ns();
	rec.unwinding_size = unwinding_size;
	rec.eh_frame_hdr_size = hdr.size();
	rec.mapped_size = unwinding_size;
	return write_record(&rec, sizeof(rec), data.data(), data.size());
}

int Jitdump::load(uint64_t addr, const CodeImage &image, uint64_t &index)
{
	if (!file_)
		return -EBADF;
	JitdumpFile &f = *file_;
	// The unwinding record applies to the next load: no other session's
	// record between them.
	std::lock_guard<std::mutex> guard(f.lock);
	if (!image.eh_frame.empty()) {
		int err = f.write_unwinding_info(image);

		if (err)
			return err;
	}
	if (!image.lines.empty()) {
		int err = f.write_debug_info(addr, image);

		if (err)
			return err;
	}

	std::vector<uint8_t> tail(image.name.begin(), image.name.end());
	tail.push_back('\0');
	tail.insert(tail.end(), image.code.begin(), image.code.end());

	JitCodeLoad rec{};
	rec.p.id = JIT_CODE_LOAD;
	rec.p.total_size = sizeof(rec) + tail.size();
	rec.p.timestamp = monotonic_ns();
	rec.pid = getpid();
	rec.tid = gettid32();
	rec.vma = addr;
	rec.code_addr = addr;
	rec.code_size = image.code.size();
	rec.code_index = f.code_index;
	const int err = f.write_record(&rec, sizeof(rec), tail.data(), tail.size());
	if (!err)
		index = f.code_index++;
	return err;
}

int Jitdump::move(uint64_t from, uint64_t to, uint64_t len, uint64_t index)
{
	if (!file_)
		return -EBADF;

	JitCodeMove rec{};
	rec.p.id = JIT_CODE_MOVE;
	rec.p.total_size = sizeof(rec);
	rec.p.timestamp = monotonic_ns();
	rec.pid = getpid();
	rec.tid = gettid32();
	rec.vma = to;
	rec.old_code_addr = from;
	rec.new_code_addr = to;
	rec.code_size = len;
	rec.code_index = index;
	std::lock_guard<std::mutex> guard(file_->lock);
	return file_->write_record(&rec, sizeof(rec));
}

} // namespace perfjit
