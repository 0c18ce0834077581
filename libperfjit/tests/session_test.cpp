// SPDX-License-Identifier: LGPL-2.1-or-later
// The session: arguments, the fallbacks, fork and thread safety, and, on a
// kernel with PR_PERF_CODE_REGION, the side files written only while
// somebody records, and the rundowns for recorders that attach late.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <malloc.h>
#include <map>
#include <memory>
#include <mutex>
#include <poll.h>
#include <set>
#include <signal.h>
#include <string>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "perfjit.h"
#include "perfjit.hpp"
#include "side_file.hpp"
#include "test_util.hpp"

namespace
{

const uint8_t kCode[64] = {0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3};

perfjit_code code_at(const void *addr, const char *name, size_t len = 16)
{
	perfjit_code c{};

	c.size = sizeof(c);
	c.name = name;
	c.addr = addr;
	c.len = len;
	return c;
}

// The options point into @buildid_dir and @jitdump_dir: pass strings that
// outlive them, never temporaries.
perfjit_options options(int mode, const std::string &buildid_dir = {},
			const std::string &jitdump_dir = {})
{
	perfjit_options o{};

	o.size = sizeof(o);
	o.mode = mode;
	o.buildid_dir = buildid_dir.empty() ? nullptr : buildid_dir.c_str();
	o.jitdump_dir = jitdump_dir.empty() ? nullptr : jitdump_dir.c_str();
	return o;
}

std::string perf_map_of(pid_t pid)
{
	const auto bytes = read_file("/tmp/perf-" + std::to_string(pid) + ".map");

	return {bytes.begin(), bytes.end()};
}

std::string hex(const void *p)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%lx", reinterpret_cast<unsigned long>(p));
	return buf;
}

// Executable memory holding a copy of kCode.
class ExecPage
{
public:
	ExecPage()
	{
		page_ = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			     0);
		if (page_ != MAP_FAILED) {
			memcpy(page_, kCode, sizeof(kCode));
			mprotect(page_, 4096, PROT_READ | PROT_EXEC);
		}
	}
	~ExecPage() { munmap(page_, 4096); }
	ExecPage(const ExecPage &) = delete;
	ExecPage &operator=(const ExecPage &) = delete;
	const uint8_t *at(size_t off) const { return static_cast<const uint8_t *>(page_) + off; }

private:
	void *page_;
};

} // namespace

TEST(Session, BadArguments)
{
	perfjit_session *s = nullptr;
	perfjit_options o = options(PERFJIT_MODE_PERF_MAP);

	EXPECT_EQ(perfjit_open(&o, nullptr), -EINVAL);
	o.size = 8;
	EXPECT_EQ(perfjit_open(&o, &s), -EINVAL);
	o = options(7);
	EXPECT_EQ(perfjit_open(&o, &s), -EINVAL);
	o = options(PERFJIT_MODE_AUTO);
	o.fallback = 9;
	EXPECT_EQ(perfjit_open(&o, &s), -EINVAL);
	o = options(PERFJIT_MODE_PERF_MAP);
	o.flags = 0x80;
	EXPECT_EQ(perfjit_open(&o, &s), -EINVAL);
	EXPECT_EQ(s, nullptr);
	EXPECT_EQ(perfjit_rundown(nullptr), -EINVAL);
	EXPECT_EQ(perfjit_rundown_fd(nullptr), -EINVAL);

	perfjit_code c = code_at(kCode, "f");
	EXPECT_EQ(perfjit_load(nullptr, &c), -EINVAL);
	EXPECT_EQ(perfjit_unload(nullptr, kCode), -EINVAL);
	perfjit_close(nullptr);

	o = options(PERFJIT_MODE_PERF_MAP);
	ASSERT_EQ(perfjit_open(&o, &s), 0);
	EXPECT_EQ(perfjit_load(s, nullptr), -EINVAL);
	perfjit_code bad = c;
	bad.name = nullptr;
	EXPECT_EQ(perfjit_load(s, &bad), -EINVAL);
	std::string long_name(5000, 'x');
	bad = code_at(kCode, long_name.c_str());
	EXPECT_EQ(perfjit_load(s, &bad), -ENAMETOOLONG);
	EXPECT_EQ(perfjit_load(s, &c), 0);
	EXPECT_EQ(perfjit_load(s, &c), -EEXIST);
	EXPECT_EQ(perfjit_unload(s, kCode + 1), -ENOENT);
	EXPECT_EQ(perfjit_move(s, kCode + 1, kCode + 2), -ENOENT);
	perfjit_code other = code_at(kCode + 16, "g");
	EXPECT_EQ(perfjit_load(s, &other), 0);
	EXPECT_EQ(perfjit_move(s, kCode, kCode + 16), -EEXIST);
	EXPECT_EQ(perfjit_move(s, kCode, nullptr), -EINVAL);
	char path[8];
	uint8_t id[20];
	EXPECT_EQ(perfjit_side_file(s, kCode, nullptr, 0), -EINVAL);
	EXPECT_EQ(perfjit_side_file(s, kCode + 1, path, sizeof(path)), -ENOENT);
	EXPECT_EQ(perfjit_build_id(s, kCode, nullptr), -EINVAL);
	EXPECT_EQ(perfjit_build_id(s, kCode + 1, id), -ENOENT);
	EXPECT_EQ(perfjit_unload(s, kCode), 0);
	// A fallback has nobody to announce again to, and writes its file
	// as code comes: it wants the code from the start.
	EXPECT_EQ(perfjit_rundown(s), 0);
	EXPECT_EQ(perfjit_asked(s), 1);
	EXPECT_EQ(perfjit_asked(nullptr), -EINVAL);
	EXPECT_EQ(perfjit_rundown_fd(s), -EOPNOTSUPP);
	EXPECT_STRNE(perfjit_strerror(-ENOENT), "");
	perfjit_close(s);
	unlink(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str());
}

// A caller built against an older perfjit.h passes a shorter struct, whose
// missing fields are the defaults; one built against a newer header, a
// longer one, whose fields this library does not know must be zero.
TEST(Session, OptionsOfAnOlderOrNewerHeader)
{
	struct {
		perfjit_options o;
		uint64_t newer[2];
	} big{};
	perfjit_session *s = nullptr;

	big.o = options(PERFJIT_MODE_PERF_MAP);
	big.o.size = PERFJIT_OPTIONS_SIZE_VER0;
	big.o.max_dir_bytes = 12345; // not the caller's: past its size
	ASSERT_EQ(perfjit_open(&big.o, &s), 0);
	perfjit_close(s);
	big.o.size = PERFJIT_OPTIONS_SIZE_VER0 - 8;
	EXPECT_EQ(perfjit_open(&big.o, &s), -EINVAL);
	// libperfjit 0.3's struct: no on_asked.
	big.o.size = PERFJIT_OPTIONS_SIZE_VER1;
	big.o.max_dir_bytes = 0;
	big.o.on_asked = [](void *) { abort(); }; // past its size: never called
	ASSERT_EQ(perfjit_open(&big.o, &s), 0);
	EXPECT_EQ(perfjit_asked(s), 1);
	perfjit_close(s);
	big.o.on_asked = nullptr;
	big.o.size = sizeof(big);
	ASSERT_EQ(perfjit_open(&big.o, &s), 0);
	perfjit_close(s);
	big.newer[1] = 1;
	s = nullptr;
	EXPECT_EQ(perfjit_open(&big.o, &s), -E2BIG);
	EXPECT_EQ(s, nullptr);
	// Not a size: nothing past the struct is read.
	big.newer[1] = 0;
	big.o.size = 1 << 20;
	EXPECT_EQ(perfjit_open(&big.o, &s), -E2BIG);
	EXPECT_STRNE(perfjit_strerror(-E2BIG), strerror(E2BIG));
	unlink(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str());
}

TEST(Session, PerfMapLines)
{
	const std::string map = "/tmp/perf-" + std::to_string(getpid()) + ".map";
	unlink(map.c_str());
	perfjit_options o = options(PERFJIT_MODE_PERF_MAP);
	perfjit::Session s(&o);

	ASSERT_TRUE(s.ok()) << s.error().message();
	EXPECT_EQ(s.mode(), PERFJIT_MODE_PERF_MAP);
	ASSERT_FALSE(s.load("jit_one", kCode, 16));
	ASSERT_FALSE(s.load("jit two words", kCode + 16, 8));
	ASSERT_FALSE(s.move(kCode + 16, kCode + 32));
	EXPECT_EQ(perf_map_of(getpid()), hex(kCode) + " 10 jit_one\n" + hex(kCode + 16) +
						 " 8 jit two words\n" + hex(kCode + 32) +
						 " 8 jit two words\n");
	// No side file, so no build-id.
	uint8_t id[20];
	EXPECT_EQ(perfjit_build_id(s.get(), kCode, id), -ENODATA);
	unlink(map.c_str());
}

TEST(Session, LoadManyIsAllOrNothing)
{
	const std::string map = "/tmp/perf-" + std::to_string(getpid()) + ".map";
	unlink(map.c_str());
	perfjit_options o = options(PERFJIT_MODE_PERF_MAP);
	perfjit::Session s(&o);
	ASSERT_TRUE(s.ok()) << s.error().message();

	const perfjit_code a = code_at(kCode, "jit_a"), b = code_at(kCode + 16, "jit_b", 8);
	const perfjit_code bad = code_at(kCode + 32, "");
	const perfjit_code twin = code_at(kCode, "jit_twin");
	EXPECT_EQ(perfjit_load_many(s.get(), nullptr, 1), -EINVAL);
	const perfjit_code *none[] = {&a};
	EXPECT_EQ(perfjit_load_many(s.get(), none, 0), -EINVAL);
	// Bad arguments anywhere in the batch: nothing loads, nothing is written.
	for (const std::vector<const perfjit_code *> &batch :
	     {std::vector<const perfjit_code *>{&a, nullptr}, {&a, &bad}, {&a, &b, &twin}}) {
		EXPECT_TRUE(s.load(batch));
		EXPECT_EQ(s.unload(kCode), perfjit::make_error(-ENOENT));
	}
	EXPECT_EQ(perf_map_of(getpid()), "");

	ASSERT_FALSE(s.load({&a, &b}));
	EXPECT_EQ(perf_map_of(getpid()),
		  hex(kCode) + " 10 jit_a\n" + hex(kCode + 16) + " 8 jit_b\n");
	// Each piece is a region of its own.
	EXPECT_EQ(s.load({&twin}), perfjit::make_error(-EEXIST));
	EXPECT_FALSE(s.unload(kCode + 16));
	EXPECT_FALSE(s.unload(kCode));
	unlink(map.c_str());
}

TEST(Session, JitdumpRecords)
{
	TempDir dir;
	perfjit_options o = options(PERFJIT_MODE_JITDUMP, {}, dir.path());
	const std::string path = dir.path() + "/jit-" + std::to_string(getpid()) + ".dump";
	{
		perfjit::Session s(&o);

		ASSERT_TRUE(s.ok()) << s.error().message();
		ASSERT_FALSE(s.load("jit_dumped", kCode, 6));
	}
	const auto bytes = read_file(path);
	ASSERT_GE(bytes.size(), 40u);
	uint32_t magic, version, total;
	memcpy(&magic, &bytes[0], 4);
	memcpy(&version, &bytes[4], 4);
	memcpy(&total, &bytes[8], 4);
	EXPECT_EQ(magic, 0x4A695444u);
	EXPECT_EQ(version, 1u);
	// The load record: id 0, then pid, tid, vma, code_addr, code_size,
	// code_index, the name and the code.
	uint32_t id, size;
	memcpy(&id, &bytes[total], 4);
	memcpy(&size, &bytes[total + 4], 4);
	EXPECT_EQ(id, 0u);
	const size_t name_at = total + 16 + 8 + 8 + 8 + 8 + 8;
	ASSERT_GT(bytes.size(), name_at + 11 + 6);
	EXPECT_STREQ(reinterpret_cast<const char *>(&bytes[name_at]), "jit_dumped");
	EXPECT_EQ(0, memcmp(&bytes[name_at + 11], kCode, 6));
	EXPECT_EQ(size, name_at + 11 + 6 - total);
	// Then the close record.
	memcpy(&id, &bytes[total + size], 4);
	EXPECT_EQ(id, 3u);
}

// The records of a jitdump file: (id, code_index of a load, or ~0).
static std::vector<std::pair<uint32_t, uint64_t>> jitdump_records(const std::vector<uint8_t> &bytes)
{
	std::vector<std::pair<uint32_t, uint64_t>> out;
	uint32_t total = 0;

	if (bytes.size() < 12)
		return out;
	memcpy(&total, &bytes[8], 4);
	for (size_t at = total; at + 16 <= bytes.size();) {
		uint32_t id, size;
		uint64_t index = ~uint64_t{0};

		memcpy(&id, &bytes[at], 4);
		memcpy(&size, &bytes[at + 4], 4);
		if (size < 16 || at + size > bytes.size())
			break;
		if (id == 0) // JIT_CODE_LOAD: header, pid, tid, vma, addr, size, index
			memcpy(&index, &bytes[at + 16 + 8 + 8 + 8 + 8], 8);
		out.emplace_back(id, index);
		at += size;
	}
	return out;
}

// Two jitdump sessions of one process share its one file: one header, one
// sequence of code indices, and the close record when the last one closes.
TEST(Session, JitdumpSessionsShareTheFile)
{
	TempDir dir;
	perfjit_options o = options(PERFJIT_MODE_JITDUMP, {}, dir.path());
	const std::string path = dir.path() + "/jit-" + std::to_string(getpid()) + ".dump";
	{
		auto a = std::make_unique<perfjit::Session>(&o);
		perfjit::Session b(&o);

		ASSERT_TRUE(a->ok() && b.ok());
		ASSERT_FALSE(a->load("jit_a", kCode, 4));
		ASSERT_FALSE(b.load("jit_b", kCode + 8, 4));
		a.reset();
		ASSERT_FALSE(b.load("jit_c", kCode + 16, 4));
		const auto open = jitdump_records(read_file(path));
		const std::vector<std::pair<uint32_t, uint64_t>> loads = {{0, 0}, {0, 1}, {0, 2}};
		EXPECT_EQ(open, loads);
	}
	const auto closed = jitdump_records(read_file(path));
	ASSERT_EQ(closed.size(), 4u);
	EXPECT_EQ(closed.back().first, 3u); // JIT_CODE_CLOSE
}

// An unwind table goes into an unwinding record before the load: the
// .eh_frame, then the header perf inject --jit needs, made for the table
// at the first 8-byte aligned address after the code and the header
// right after it.
TEST(Session, JitdumpUnwindingRecordBeforeTheLoad)
{
	// CIE: "zR", pcrel sdata4, CFA = rsp + 8, r16 at CFA - 8; one FDE for
	// 6 bytes of code at the table's address - 8 (the code rounded up).
	std::vector<uint8_t> eh = {0x14, 0,    0,    0, 0,    0,    0, 0, 1,	'z', 'R', 0,
				   1,	 0x78, 0x10, 1, 0x1b, 0x0c, 7, 8, 0x90, 1,   0,	  0};
	const int32_t pc_begin = -(8 + 24 + 8);
	const uint32_t fde[] = {16, 28, static_cast<uint32_t>(pc_begin), 6, 0};
	const auto *fb = reinterpret_cast<const uint8_t *>(fde);
	eh.insert(eh.end(), fb, fb + sizeof(fde));
	TempDir dir;
	perfjit_options o = options(PERFJIT_MODE_JITDUMP, {}, dir.path());
	const std::string path = dir.path() + "/jit-" + std::to_string(getpid()) + ".dump";
	{
		perfjit::Session s(&o);
		perfjit_code c = code_at(kCode, "jit_unwound", 6);
		c.eh_frame = eh.data();
		c.eh_frame_len = eh.size();

		ASSERT_TRUE(s.ok()) << s.error().message();
		ASSERT_EQ(perfjit_load(s.get(), &c), 0);
	}
	const auto bytes = read_file(path);
	uint32_t total, id, size;
	memcpy(&total, &bytes[8], 4);
	ASSERT_GE(bytes.size(), total + 40u);
	memcpy(&id, &bytes[total], 4);
	memcpy(&size, &bytes[total + 4], 4);
	ASSERT_EQ(id, 4u); // JIT_CODE_UNWINDING_INFO
	EXPECT_EQ(size % 8, 0u);
	uint64_t unwinding_size, hdr_size, mapped_size;
	memcpy(&unwinding_size, &bytes[total + 16], 8);
	memcpy(&hdr_size, &bytes[total + 24], 8);
	memcpy(&mapped_size, &bytes[total + 32], 8);
	EXPECT_EQ(hdr_size, 20u);
	EXPECT_EQ(unwinding_size, eh.size() + hdr_size);
	EXPECT_EQ(mapped_size, unwinding_size);
	ASSERT_GE(size, 40 + unwinding_size);
	const uint8_t *data = &bytes[total + 40];
	EXPECT_EQ(0, memcmp(data, eh.data(), eh.size()));
	// The header: it finds the table, and the one FDE at code offset 0.
	const uint8_t *hdr = data + eh.size();
	const int64_t hdr_addr = 8 + eh.size(); // the code at 0
	int32_t eh_ptr, loc, fde_at;
	uint32_t count;
	memcpy(&eh_ptr, hdr + 4, 4);
	memcpy(&count, hdr + 8, 4);
	memcpy(&loc, hdr + 12, 4);
	memcpy(&fde_at, hdr + 16, 4);
	EXPECT_EQ(hdr[0], 1);
	EXPECT_EQ(hdr_addr + 4 + eh_ptr, 8);
	EXPECT_EQ(count, 1u);
	EXPECT_EQ(hdr_addr + loc, 0);
	EXPECT_EQ(hdr_addr + fde_at, 8 + 24);
	// Then the load record it applies to.
	memcpy(&id, &bytes[total + size], 4);
	EXPECT_EQ(id, 0u);
}

// A table that cannot be indexed gets no unwinding record; the load stays.
TEST(Session, JitdumpNoUnwindingRecordForATableThatCannotBeRead)
{
	const uint8_t bad[] = {0x14, 0, 0, 0, 0, 0, 0, 0, 1, 'z'}; // a CIE cut short
	TempDir dir;
	perfjit_options o = options(PERFJIT_MODE_JITDUMP, {}, dir.path());
	const std::string path = dir.path() + "/jit-" + std::to_string(getpid()) + ".dump";
	{
		perfjit::Session s(&o);
		perfjit_code c = code_at(kCode, "jit_plain", 6);
		c.eh_frame = bad;
		c.eh_frame_len = sizeof(bad);

		ASSERT_TRUE(s.ok()) << s.error().message();
		ASSERT_EQ(perfjit_load(s.get(), &c), 0);
	}
	const auto bytes = read_file(path);
	uint32_t total, id;
	memcpy(&total, &bytes[8], 4);
	ASSERT_GE(bytes.size(), total + 8u);
	memcpy(&id, &bytes[total], 4);
	EXPECT_EQ(id, 0u); // JIT_CODE_LOAD, no JIT_CODE_UNWINDING_INFO before it
}

TEST(Session, JitdumpFullDiskLosesOnlyTheFailedRecord)
{
	TempDir dir;
	perfjit_options o = options(PERFJIT_MODE_JITDUMP, {}, dir.path());
	const std::string path = dir.path() + "/jit-" + std::to_string(getpid()) + ".dump";
	perfjit::Session s(&o);
	ASSERT_TRUE(s.ok()) << s.error().message();
	const size_t header = read_file(path).size();
	ASSERT_GT(header, 0u);

	// A file size limit is a full disk that needs no privileges: room for
	// the small record, not for the large one, which is written in part.
	std::vector<uint8_t> big(8192, 0x90);
	struct rlimit old;
	signal(SIGXFSZ, SIG_IGN);
	ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
	// The soft limit only: a lowered hard limit cannot be raised again.
	struct rlimit small = {header + 1024, old.rlim_max};
	ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
	const std::error_code full = s.load("jit_big", big.data(), big.size());
	const std::error_code fits = s.load("jit_small", kCode, 6);
	setrlimit(RLIMIT_FSIZE, &old);

	EXPECT_EQ(full, perfjit::make_error(-ENOSPC));
	EXPECT_FALSE(fits) << fits.message();
	// The failed record left nothing: the next one follows the header.
	const auto bytes = read_file(path);
	ASSERT_GT(bytes.size(), header + 8);
	uint32_t id, size;
	memcpy(&id, &bytes[header], 4);
	memcpy(&size, &bytes[header + 4], 4);
	EXPECT_EQ(id, 0u); // JIT_CODE_LOAD
	EXPECT_EQ(header + size, bytes.size());
	const size_t name_at = header + 16 + 8 + 8 + 8 + 8 + 8;
	EXPECT_STREQ(reinterpret_cast<const char *>(&bytes[name_at]), "jit_small");
}

TEST(Session, UnwritableFallbackFilesAreAnError)
{
	const std::string unwritable = "/dev/null/jit";
	perfjit_options o = options(PERFJIT_MODE_JITDUMP, {}, unwritable);
	perfjit_session *s = reinterpret_cast<perfjit_session *>(1);

	EXPECT_EQ(perfjit_open(&o, &s), -ENOTDIR);
	EXPECT_EQ(s, nullptr);
}

TEST(Session, AutoFallsBackWithoutTheIoctl)
{
	setenv("PERFJIT_NO_CODE_REGION", "1", 1);
	perfjit_options o = options(PERFJIT_MODE_AUTO);
	{
		perfjit::Session s(&o);

		ASSERT_TRUE(s.ok());
		EXPECT_EQ(s.mode(), PERFJIT_MODE_PERF_MAP);
	}
	TempDir dir;
	o = options(PERFJIT_MODE_AUTO, {}, dir.path());
	o.fallback = PERFJIT_MODE_JITDUMP;
	{
		perfjit::Session s(&o);

		ASSERT_TRUE(s.ok());
		EXPECT_EQ(s.mode(), PERFJIT_MODE_JITDUMP);
	}
	o = options(PERFJIT_MODE_CODE_REGION);
	perfjit::Session s(&o);
	EXPECT_EQ(s.error(), perfjit::make_error(-EOPNOTSUPP));
	unsetenv("PERFJIT_NO_CODE_REGION");
}

TEST(Session, ChildAnnouncesOnItsOwn)
{
	perfjit_options o = options(PERFJIT_MODE_PERF_MAP);
	perfjit::Session s(&o);

	ASSERT_TRUE(s.ok());
	ASSERT_FALSE(s.load("jit_parent", kCode, 8));
	const pid_t child = fork();
	if (child == 0)
		_exit(s.load("jit_child", kCode + 8, 8) ? 1 : 0);
	int status = 0;
	ASSERT_EQ(waitpid(child, &status, 0), child);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	EXPECT_EQ(perf_map_of(child), hex(kCode + 8) + " 8 jit_child\n");
	EXPECT_EQ(perf_map_of(getpid()), hex(kCode) + " 8 jit_parent\n");
	unlink(("/tmp/perf-" + std::to_string(child) + ".map").c_str());
	unlink(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str());
}

TEST(Session, ConcurrentLoads)
{
	perfjit_options o = options(PERFJIT_MODE_PERF_MAP);
	perfjit::Session s(&o);
	std::vector<std::thread> threads;
	static uint8_t code[8][64];

	ASSERT_TRUE(s.ok());
	for (int t = 0; t < 8; t++) {
		threads.emplace_back([&s, t] {
			for (int i = 0; i < 64; i++)
				ASSERT_FALSE(s.load("jit_t" + std::to_string(t), &code[t][i], 1));
		});
	}
	for (auto &t : threads)
		t.join();
	const std::string map = perf_map_of(getpid());
	size_t lines = 0;
	for (size_t pos = 0; (pos = map.find('\n', pos)) != std::string::npos; pos++)
		lines++;
	EXPECT_EQ(lines, 8u * 64u);
	for (int t = 0; t < 8; t++)
		EXPECT_NE(map.find(hex(&code[t][63]) + " 1 jit_t" + std::to_string(t) + "\n"),
			  std::string::npos);
	unlink(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str());
}

namespace
{

constexpr uint32_t kRecordLost = 2, kRecordMmap3 = 23;
// PERF_EVENT_IOC_CODE_REGION_RUNDOWN, which the build host's headers lack.
const unsigned long kIocCodeRegionRundown = _IO('$', 12);
constexpr uint16_t kMmap3CodeRegion = 1U << 0, kMmap3Unmap = 1U << 1, kMmap3Rundown = 1U << 4;

// What a recorder saw of one code-region record.
struct Seen {
	uint64_t time;
	uint32_t pid;
	uint64_t addr, len;
	uint16_t flags;
};

// A recorder as perf record -p opens one: a dummy event on each thread of
// @pid (not inherited: the kernel maps no buffer of an inherited event
// without a CPU), with perf_event_attr::mmap3 and ::code_regions (bits 40 and 41 of
// the flags, which older uapi headers do not name), records stamped with
// their time, and a ring buffer each, without which an event takes nothing.
class Recorder
{
public:
	explicit Recorder(pid_t pid = getpid(), size_t data_pages = 64)
	    : rb_len_((data_pages + 1) * sysconf(_SC_PAGESIZE))
	{
		const std::string dir = "/proc/" + std::to_string(pid) + "/task";
		DIR *d = opendir(dir.c_str());

		if (!d)
			return;
		while (struct dirent *e = readdir(d)) {
			if (e->d_name[0] == '.')
				continue;
			if (!open_one(atoi(e->d_name))) {
				bufs_.clear();
				break;
			}
		}
		closedir(d);
		ask();
	}
	// Asks the runtime for a rundown, as perf record does once it can
	// take the records.
	void ask()
	{
		for (auto &b : bufs_)
			ioctl(b.fd.get(), kIocCodeRegionRundown, 0);
	}
	~Recorder()
	{
		for (auto &b : bufs_)
			munmap(b.base, rb_len_);
	}
	Recorder(const Recorder &) = delete;
	Recorder &operator=(const Recorder &) = delete;
	bool ok() const { return !bufs_.empty(); }
	// Records the kernel dropped (PERF_RECORD_LOST), as of code_regions().
	uint64_t lost() const { return lost_; }

	// The code-region records taken so far, in time order.
	std::vector<Seen> code_regions()
	{
		const size_t page = sysconf(_SC_PAGESIZE), size = rb_len_ - page;

		for (auto &b : bufs_) {
			auto *pg = static_cast<perf_event_mmap_page *>(b.base);
			const auto *data = static_cast<const uint8_t *>(b.base) + page;
			const uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
			uint64_t tail = pg->data_tail;
			std::vector<uint8_t> rec;

			while (tail < head) {
				perf_event_header h;

				for (size_t i = 0; i < sizeof(h); i++)
					reinterpret_cast<uint8_t *>(&h)[i] =
						data[(tail + i) % size];
				rec.resize(h.size);
				for (size_t i = 0; i < h.size; i++)
					rec[i] = data[(tail + i) % size];
				tail += h.size;
				if (h.type == kRecordLost && h.size >= 24) {
					uint64_t n;

					memcpy(&n, &rec[16], sizeof(n));
					lost_ += n;
				}
				if (h.type != kRecordMmap3 || h.size < 88)
					continue;
				Seen seen{};
				uint16_t flags;

				memcpy(&flags, &rec[72], sizeof(flags));
				if (!(flags & kMmap3CodeRegion))
					continue;
				seen.flags = flags;
				memcpy(&seen.pid, &rec[8], sizeof(seen.pid));
				memcpy(&seen.addr, &rec[16], sizeof(seen.addr));
				memcpy(&seen.len, &rec[24], sizeof(seen.len));
				memcpy(&seen.time, &rec[h.size - 8], sizeof(seen.time));
				seen_.push_back(seen);
			}
			__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
		}
		std::stable_sort(seen_.begin(), seen_.end(),
				 [](const Seen &a, const Seen &b) { return a.time < b.time; });
		return seen_;
	}

private:
	struct Buf {
		perfjit::UniqueFd fd;
		void *base;
	};

	bool open_one(pid_t tid)
	{
		perf_event_attr attr{};
		uint64_t flags;

		attr.size = sizeof(attr);
		attr.type = PERF_TYPE_SOFTWARE;
		attr.config = PERF_COUNT_SW_DUMMY;
		attr.sample_type = PERF_SAMPLE_TIME;
		attr.sample_id_all = 1;
		attr.exclude_kernel = 1;
		// One clock for all CPUs: the records of different threads are
		// put in time order, and perf's default clock, local_clock(), is
		// per CPU and need not order two CPUs' records.
		attr.use_clockid = 1;
		attr.clockid = CLOCK_MONOTONIC;
		memcpy(&flags, reinterpret_cast<char *>(&attr) + 40, sizeof(flags));
		flags |= 3ULL << 40;
		memcpy(reinterpret_cast<char *>(&attr) + 40, &flags, sizeof(flags));
		perfjit::UniqueFd fd(static_cast<int>(
			syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC)));
		if (!fd)
			return false;
		void *base =
			mmap(nullptr, rb_len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
		if (base == MAP_FAILED)
			return false;
		bufs_.push_back(Buf{std::move(fd), base});
		return true;
	}

	size_t rb_len_;
	std::vector<Buf> bufs_;
	std::vector<Seen> seen_;
	uint64_t lost_ = 0;
};

// Waits up to 60 s (the VM emulates its CPU) for @pred; whether it came true.
template <typename Pred>
bool eventually(Pred &&pred)
{
	for (int i = 0; i < 6000; i++) {
		if (pred())
			return true;
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	return pred();
}

bool stored(perfjit_session *s, const void *addr)
{
	char path[4096];

	return perfjit_side_file(s, addr, path, sizeof(path)) == 0;
}

// A code-region session on a scratch build-id cache; skipped on a kernel
// without the prctl.
class CodeRegion : public ::testing::Test
{
protected:
	void SetUp() override { open(0); }
	void open(uint32_t flags)
	{
		opts_ = options(PERFJIT_MODE_CODE_REGION, dir_.path());
		opts_.flags = flags;
		session_ = std::make_unique<perfjit::Session>(&opts_);
		if (session_->error() == perfjit::make_error(-EOPNOTSUPP))
			GTEST_SKIP() << "the running kernel has no PR_PERF_CODE_REGION "
					"(make check runs this in the VM)";
		ASSERT_TRUE(session_->ok()) << session_->error().message();
	}

	TempDir dir_;
	perfjit_options opts_{};
	std::unique_ptr<perfjit::Session> session_;
};

} // namespace

TEST_F(CodeRegion, SideFilesOnlyOnceARecorderAsked)
{
	perfjit::Session &s = *session_;

	ExecPage page;
	char path[4096];
	ASSERT_FALSE(s.load("jit_unseen", page.at(0), 16));
	EXPECT_EQ(perfjit_side_file(s.get(), page.at(0), path, sizeof(path)), -ENODATA);

	Recorder recorder;
	ASSERT_TRUE(recorder.ok()) << strerror(errno);
	// The library's thread stores jit_unseen's side file: the kernel told
	// it that a recorder asked.
	EXPECT_TRUE(eventually([&] { return stored(s.get(), page.at(0)); }));
	// From then on a load is announced, and must describe executable
	// memory.
	EXPECT_EQ(s.load("jit_data", kCode, 16), perfjit::make_error(-EINVAL));
	ASSERT_FALSE(s.load("jit_seen", page.at(16), 16));
	for (size_t off : {0, 16}) {
		uint8_t id[20];

		ASSERT_EQ(perfjit_side_file(s.get(), page.at(off), path, sizeof(path)), 0);
		EXPECT_EQ(access(path, R_OK), 0) << path;
		ASSERT_EQ(perfjit_build_id(s.get(), page.at(off), id), 0);
	}
	EXPECT_FALSE(s.unload(page.at(0)));
	EXPECT_FALSE(s.move(page.at(16), page.at(32)));
	EXPECT_EQ(perfjit_side_file(s.get(), page.at(32), path, sizeof(path)), 0);
}

TEST_F(CodeRegion, LoadManySharesOneSideFile)
{
	perfjit::Session &s = *session_;

	ExecPage page;
	const perfjit_code a = code_at(page.at(0), "jit_a", 6);
	const perfjit_code b = code_at(page.at(16), "jit_b", 16);
	const perfjit_code c = code_at(page.at(32), "jit_c", 8);
	const perfjit_code d = code_at(page.at(48), "jit_d", 8);
	char path[4096];
	ASSERT_FALSE(s.load({&a, &b}));
	EXPECT_EQ(perfjit_side_file(s.get(), page.at(0), path, sizeof(path)), -ENODATA);

	Recorder recorder;
	ASSERT_TRUE(recorder.ok()) << strerror(errno);
	EXPECT_TRUE(eventually([&] { return stored(s.get(), page.at(0)); }));
	ASSERT_FALSE(s.load({&c, &d}));

	// One file per batch, with the batch's build-id; the first batch was
	// stored when the recorder appeared.
	std::vector<std::string> paths;
	for (size_t off : {0, 16, 32, 48}) {
		perfjit::BuildId id;

		ASSERT_EQ(perfjit_side_file(s.get(), page.at(off), path, sizeof(path)), 0);
		ASSERT_EQ(perfjit_build_id(s.get(), page.at(off), id.data()), 0);
		EXPECT_EQ(path, perfjit::side_file_path(dir_.path(), id));
		EXPECT_EQ(access(path, R_OK), 0) << path;
		paths.push_back(path);
	}
	EXPECT_EQ(paths[0], paths[1]);
	EXPECT_EQ(paths[2], paths[3]);
	EXPECT_NE(paths[0], paths[2]);
	ASSERT_EQ(perfjit_side_file(s.get(), page.at(32), path, sizeof(path)), 0);
	const auto elf = read_file(path);
	// Both functions' code is in the file, at the offsets the regions name.
	ASSERT_GE(elf.size(), perfjit::kTextOffset + 24);
	EXPECT_EQ(0, memcmp(&elf[perfjit::kTextOffset], page.at(32), 8));
	EXPECT_EQ(0, memcmp(&elf[perfjit::kTextOffset + 16], page.at(48), 8));
	EXPECT_EQ(s.load({&a}), perfjit::make_error(-EEXIST));
	EXPECT_FALSE(s.unload(page.at(32)));
	EXPECT_FALSE(s.move(page.at(48), page.at(64)));
}

// While somebody records, a load announces at once and leaves the side
// file to the library's thread: the file appears with no call that waits
// for it, and perfjit_close() stores whatever is still pending.
TEST_F(CodeRegion, SideFilesStoredByTheThreadAndAtClose)
{
	Recorder recorder;
	ASSERT_TRUE(recorder.ok()) << strerror(errno);
	ExecPage page;
	std::vector<std::string> paths;
	for (size_t off = 0; off < 512; off += 16) {
		perfjit::BuildId id;

		ASSERT_FALSE(session_->load("jit_f" + std::to_string(off), page.at(off), 16));
		ASSERT_EQ(perfjit_build_id(session_->get(), page.at(off), id.data()), 0);
		paths.push_back(perfjit::side_file_path(dir_.path(), id));
	}
	EXPECT_TRUE(eventually([&] { return access(paths[0].c_str(), R_OK) == 0; }));
	session_.reset();
	for (const auto &path : paths)
		EXPECT_EQ(access(path.c_str(), R_OK), 0) << path;
}

// While somebody records, single loads share an open pack: each is
// announced at once, with the pack's build-id and its own offset in it, and
// the library's thread writes the pack when its delay has passed, with no
// call that waits for it. A load after that opens another pack.
TEST_F(CodeRegion, SingleLoadsShareAnOpenPack)
{
	perfjit::Session &s = *session_;
	Recorder recorder;
	ASSERT_TRUE(recorder.ok()) << strerror(errno);
	ExecPage page;
	// Once this one is stored, the rundown that the recorder asked for
	// has run: it does not seal the pack below halfway.
	ASSERT_FALSE(s.load("jit_first", page.at(512), 16));
	ASSERT_TRUE(eventually([&] { return stored(s.get(), page.at(512)); }));

	perfjit::BuildId id, other;
	for (size_t off = 0; off < 256; off += 16) {
		ASSERT_FALSE(s.load("jit_p" + std::to_string(off), page.at(off), 16));
		ASSERT_EQ(perfjit_build_id(s.get(), page.at(off), other.data()), 0);
		if (!off)
			id = other;
		EXPECT_EQ(other, id) << "function at " << off;
	}
	const std::string path = perfjit::side_file_path(dir_.path(), id);
	EXPECT_TRUE(eventually([&] { return access(path.c_str(), R_OK) == 0; })) << path;
	// Every function's code, at the distance it has in memory.
	const auto elf = read_file(path);
	ASSERT_GE(elf.size(), perfjit::kTextOffset + 256);
	for (size_t off = 0; off < 256; off += 16)
		EXPECT_EQ(0, memcmp(&elf[perfjit::kTextOffset + off], page.at(off), 16)) << off;

	ASSERT_FALSE(s.load("jit_later", page.at(1024), 16));
	ASSERT_EQ(perfjit_build_id(s.get(), page.at(1024), other.data()), 0);
	EXPECT_NE(other, id);
	EXPECT_FALSE(s.unload(page.at(16)));
}

// The size of the regular files under @dir/.build-id/xx/, and the build-ids
// that name them.
uint64_t side_files_in(const std::string &dir, std::set<std::string> *names = nullptr)
{
	uint64_t total = 0;
	std::unique_ptr<FILE, int (*)(FILE *)> p(
		popen(("find '" + dir +
		       "/.build-id' -mindepth 2 -maxdepth 2 -path '*/.build-id/[0-9a-f][0-9a-f]/*' "
		       "-type f -printf '%s %p\\n'")
			      .c_str(),
		      "r"),
		pclose);
	char line[4096];

	while (p && fgets(line, sizeof(line), p.get())) {
		char *end;

		total += strtoull(line, &end, 10);
		if (names)
			names->insert(std::string(end + 1, strcspn(end + 1, "\n")));
	}
	return total;
}

// A long-lived runtime that loads and unloads code while somebody records
// keeps its build-id directory under perfjit_options::max_dir_bytes: the
// oldest side files go, an earlier run's first, never one of live code,
// not even by another process's bound. One that something removed anyway
// is put back for the next recorder.
TEST_F(CodeRegion, BuildIdDirectoryKeptUnderItsBound)
{
	session_.reset();
	// An earlier run's side files, older than anything this one writes.
	std::vector<std::string> earlier;
	for (int i = 0; i < 20; i++) {
		perfjit::CodeImage image;

		image.name = "jit_earlier_" + std::to_string(i);
		image.code.assign(kCode, kCode + 16);
		const perfjit::BuildId id = perfjit::build_id_of(image);
		ASSERT_EQ(perfjit::store_side_file(dir_.path(), image, id), 0);
		earlier.push_back(perfjit::side_file_path(dir_.path(), id));
		const timespec old[2] = {{1000, 0}, {1000, 0}};
		ASSERT_EQ(utimensat(AT_FDCWD, earlier.back().c_str(), old, 0), 0);
	}
	constexpr uint64_t kBound = 32 << 10;
	opts_.max_dir_bytes = kBound;
	session_ = std::make_unique<perfjit::Session>(&opts_);
	ASSERT_TRUE(session_->ok()) << session_->error().message();
	perfjit::Session &s = *session_;
	Recorder recorder;
	ASSERT_TRUE(recorder.ok()) << strerror(errno);

	// Batches of two functions, a side file each, of which the last 4
	// stay live: 200 files, several times the bound.
	ExecPage page;
	std::vector<std::string> names;
	for (int i = 0; i < 200; i++) {
		const size_t off = (i % 8) * 32;
		names.push_back("jit_batch_" + std::to_string(i));
		const perfjit_code a = code_at(page.at(off), names.back().c_str(), 16);
		const perfjit_code b = code_at(page.at(off + 16), names.back().c_str(), 16);

		if (i >= 4) {
			const size_t old = ((i - 4) % 8) * 32;

			ASSERT_FALSE(s.unload(page.at(old)));
			ASSERT_FALSE(s.unload(page.at(old + 16)));
		}
		ASSERT_FALSE(s.load({&a, &b}));
	}
	char path[4096];
	std::vector<std::string> live;
	for (int i = 196; i < 200; i++) {
		ASSERT_EQ(perfjit_side_file(s.get(), page.at((i % 8) * 32), path, sizeof(path)), 0);
		live.push_back(path);
	}
	EXPECT_LE(side_files_in(dir_.path()), kBound);
	for (const auto &p : live)
		EXPECT_EQ(access(p.c_str(), R_OK), 0) << p;
	for (const auto &p : earlier)
		EXPECT_NE(access(p.c_str(), F_OK), 0) << "an earlier run's file is still there";
	std::set<std::string> left;
	side_files_in(dir_.path(), &left);
	EXPECT_GT(left.size(), live.size()) << "the bound removed more than it must";

	// Another process's bound, which knows nothing of this one's code,
	// leaves its live files: they are pinned.
	perfjit::DirBound other(1);
	other.add(1);
	ASSERT_EQ(other.prune(dir_.path(), {}), 0);
	for (const auto &p : live)
		EXPECT_EQ(access(p.c_str(), R_OK), 0) << p;
	std::set<std::string> after;
	side_files_in(dir_.path(), &after);
	EXPECT_EQ(after.size(), live.size()) << "the other bound removed all but the live files";

	// Removed anyway (rm): the next recorder's rundown puts it back.
	ASSERT_EQ(unlink(live[0].c_str()), 0);
	Recorder late;
	ASSERT_TRUE(late.ok()) << strerror(errno);
	EXPECT_TRUE(eventually([&] { return access(live[0].c_str(), R_OK) == 0; })) << live[0];
}

// Once the side files are stored, the library keeps of each live function
// only what a rundown announces (its name, address, length and place in a
// side file): the code, lines and unwind table are in the file. Measured
// with the allocator's own count, over 4,096 functions of 256 bytes.
TEST_F(CodeRegion, StoredFunctionsKeepOnlyWhatARundownNeeds)
{
	perfjit::Session &s = *session_;
	constexpr size_t kFunctions = 4096, kBatch = 256, kSize = 256, kLines = 32;
	const size_t len = kFunctions * kSize;
	void *mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(mem, MAP_FAILED);
	auto *code = static_cast<uint8_t *>(mem);
	for (size_t i = 0; i < len; i += sizeof(kCode))
		memcpy(code + i, kCode, sizeof(kCode));
	ASSERT_EQ(mprotect(mem, len, PROT_READ | PROT_EXEC), 0);

	std::vector<std::string> names(kFunctions);
	std::vector<perfjit_line> lines(kLines);
	for (size_t i = 0; i < kLines; i++)
		lines[i] = {i * (kSize / kLines), static_cast<uint32_t>(i + 1), 0};
	std::vector<perfjit_code> codes(kFunctions);
	for (size_t i = 0; i < kFunctions; i++) {
		names[i] = "jit_kept_" + std::to_string(100000 + i);
		codes[i] = code_at(code + i * kSize, names[i].c_str(), kSize);
		codes[i].source_file = "kept.js";
		codes[i].lines = lines.data();
		codes[i].nr_lines = kLines;
	}
	const auto in_use = [] { return static_cast<double>(mallinfo2().uordblks); };
	const double before = in_use();
	for (size_t b = 0; b < kFunctions; b += kBatch) {
		std::vector<const perfjit_code *> batch;

		for (size_t i = b; i < b + kBatch; i++)
			batch.push_back(&codes[i]);
		ASSERT_FALSE(s.load(batch));
	}
	// Nobody recorded yet: the copy is what a later recorder gets.
	const double unstored = (in_use() - before) / kFunctions;
	EXPECT_GT(unstored, kSize + kLines * sizeof(perfjit_line));
	{
		Recorder recorder;
		ASSERT_TRUE(recorder.ok());
		for (size_t b = 0; b < kFunctions; b += kBatch)
			EXPECT_TRUE(eventually([&] { return stored(s.get(), code + b * kSize); }));
	}
	const double kept = (in_use() - before) / kFunctions;
	RecordProperty("bytes_per_function_unstored", std::to_string(unstored));
	RecordProperty("bytes_per_function_stored", std::to_string(kept));
	// A map entry with the region (about 110 bytes), the name (15 bytes
	// here: in the string itself, no allocation of its own) and its
	// offset in the file.
	EXPECT_LT(kept, 256) << "bytes per stored function; " << unstored
			     << " before it was stored";

	// And a late recorder still gets every function, from what is kept.
	Recorder late;
	ASSERT_TRUE(late.ok());
	EXPECT_TRUE(eventually([&] {
		std::set<uint64_t> covered;
		for (const Seen &r : late.code_regions())
			covered.insert(r.addr);
		return covered.size() == kFunctions / kBatch;
	}));
	munmap(mem, len);
}

// A side file the library's thread cannot store: the load itself succeeds
// (it does not wait for the write), and perfjit_side_file() reports why.
// The load may come before the library's thread has seen the recorder's
// request: the code is then nobody's recorded code (-ENODATA) until the
// rundown announces it and tries to store its file.
TEST_F(CodeRegion, StoreErrorReportedBySideFile)
{
	const std::string bad = "/dev/null/buildid";
	perfjit_options o = options(PERFJIT_MODE_CODE_REGION, bad);
	// And told to the log, which says what failed where.
	struct Said {
		std::mutex lock;
		std::vector<std::pair<int, std::string>> lines;
	} said;
	o.log = [](void *arg, int level, const char *message) {
		auto *d = static_cast<Said *>(arg);
		std::lock_guard<std::mutex> guard(d->lock);

		d->lines.emplace_back(level, message);
	};
	o.log_arg = &said;
	perfjit::Session s(&o);
	ASSERT_TRUE(s.ok()) << s.error().message();
	Recorder recorder;
	ASSERT_TRUE(recorder.ok()) << strerror(errno);
	ExecPage page;
	char path[4096];

	ASSERT_FALSE(s.load("jit_nowhere", page.at(0), 16));
	int err = -ENODATA;
	EXPECT_TRUE(eventually([&] {
		err = perfjit_side_file(s.get(), page.at(0), path, sizeof(path));
		return err != -ENODATA;
	}));
	EXPECT_EQ(err, -ENOTDIR);
	std::lock_guard<std::mutex> guard(said.lock);
	// The store's error, and a warning that nothing could be pinned there
	// either.
	const auto store = std::find_if(said.lines.begin(), said.lines.end(), [](const auto &l) {
		return l.second.find("jit_nowhere") != std::string::npos;
	});
	ASSERT_NE(store, said.lines.end());
	EXPECT_EQ(store->first, PERFJIT_LOG_ERROR);
	EXPECT_NE(store->second.find("mkdir /dev/null/buildid"), std::string::npos)
		<< store->second;
	EXPECT_NE(store->second.find(strerror(ENOTDIR)), std::string::npos) << store->second;
	EXPECT_TRUE(std::any_of(said.lines.begin(), said.lines.end(), [](const auto &l) {
		return l.first == PERFJIT_LOG_WARNING &&
		       l.second.find("not pinned") != std::string::npos;
	}));
}

// fork() does not wait for the side files that the library's thread is
// writing: the parent's thread goes on with them after the fork, and the
// child, whose code is its own, leaves them alone. The thread is held in
// the middle of its writes by the log, which it calls for a store that
// failed.
TEST_F(CodeRegion, ForkDoesNotWaitForPendingWrites)
{
	struct Gate {
		std::mutex lock;
		std::condition_variable cv;
		bool entered = false;
		bool open = false;
	} gate;
	const std::string bad = "/dev/null/buildid"; // outlives the options
	perfjit_options o = options(PERFJIT_MODE_CODE_REGION, bad);
	// Held in the store's error, which the library's thread logs as it
	// writes, outside the session's lock.
	o.log = [](void *arg, int, const char *message) {
		auto *g = static_cast<Gate *>(arg);
		if (!strstr(message, "was not stored"))
			return;
		std::unique_lock<std::mutex> guard(g->lock);

		g->entered = true;
		g->cv.notify_all();
		g->cv.wait(guard, [g] { return g->open; });
	};
	o.log_arg = &gate;
	auto release = [&gate] {
		std::lock_guard<std::mutex> guard(gate.lock);

		gate.open = true;
		gate.cv.notify_all();
	};
	perfjit::Session s(&o);
	ASSERT_TRUE(s.ok()) << s.error().message();
	Recorder recorder;
	ASSERT_TRUE(recorder.ok()) << strerror(errno);
	ExecPage page;
	ASSERT_FALSE(s.load("jit_held", page.at(0), 16));
	{
		std::unique_lock<std::mutex> guard(gate.lock);
		ASSERT_TRUE(gate.cv.wait_for(guard, std::chrono::seconds(30),
					     [&gate] { return gate.entered; }));
	}
	// Were fork() to wait for the writes, the watchdog would let it go
	// after 10 s.
	std::thread watchdog([&gate] {
		std::unique_lock<std::mutex> guard(gate.lock);

		if (!gate.cv.wait_for(guard, std::chrono::seconds(10),
				      [&gate] { return gate.open; })) {
			gate.open = true;
			gate.cv.notify_all();
		}
	});
	const pid_t child = fork();
	if (child == 0)
		_exit(s.load("jit_in_child", page.at(16), 16) ? 1 : 0);
	bool waited;
	{
		std::lock_guard<std::mutex> guard(gate.lock);
		waited = gate.open; // fork() returned only once the writes could go on
	}
	int status = 0;
	ASSERT_EQ(waitpid(child, &status, 0), child);
	release();
	watchdog.join();
	EXPECT_FALSE(waited);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	// The parent goes on: its thread took the write up again.
	ASSERT_FALSE(s.load("jit_after", page.at(32), 16));
}

// A recorder that attaches after the code was loaded gets every live piece
// of it again, marked as a rundown, from the library's own thread; unloaded
// code is not announced again.
TEST_F(CodeRegion, RundownForALateRecorder)
{
	perfjit::Session &s = *session_;
	ExecPage page;

	// Apart in memory: one rundown record each, although they share a
	// pack (adjacent code in one side file is one region).
	ASSERT_FALSE(s.load("jit_one", page.at(0), 16));
	ASSERT_FALSE(s.load("jit_two", page.at(256), 16));
	ASSERT_FALSE(s.load("jit_gone", page.at(512), 16));
	ASSERT_FALSE(s.unload(page.at(512)));

	Recorder recorder;
	ASSERT_TRUE(recorder.ok()) << strerror(errno);
	ASSERT_TRUE(eventually([&] { return stored(s.get(), page.at(256)); }));
	ASSERT_TRUE(eventually([&] {
		auto seen = recorder.code_regions();
		return std::count_if(seen.begin(), seen.end(),
				     [](const Seen &r) { return r.flags & kMmap3Rundown; }) >= 2;
	}));
	std::set<uint64_t> addrs;
	for (const Seen &r : recorder.code_regions()) {
		EXPECT_EQ(r.flags, kMmap3CodeRegion | kMmap3Rundown);
		EXPECT_EQ(r.pid, static_cast<uint32_t>(getpid()));
		addrs.insert(r.addr);
	}
	EXPECT_EQ(addrs, (std::set<uint64_t>{reinterpret_cast<uint64_t>(page.at(0)),
					     reinterpret_cast<uint64_t>(page.at(256))}));

	// A second recorder, beside the first: both get the rundown.
	Recorder second;
	ASSERT_TRUE(second.ok());
	EXPECT_TRUE(eventually([&] { return second.code_regions().size() >= 2; }));
}

// perf record -- runtime: the recorder asked before the runtime opened its
// session. The session announces from its first load, at the load's time,
// not only in the rundown that follows: code run between a load and that
// rundown has a name.
TEST_F(CodeRegion, OpenedWhileARecorderAskedAnnouncesEachLoad)
{
	session_.reset(); // the process's registration goes with its last session
	Recorder recorder;
	ASSERT_TRUE(recorder.ok()) << strerror(errno);
	// No library thread: no rundown runs before the load, so only the
	// session's look at the registration can make it announce the load.
	open(PERFJIT_OPEN_NO_THREAD);
	perfjit::Session &s = *session_;
	ExecPage page;

	ASSERT_FALSE(s.load("jit_first", page.at(0), 16));
	const auto addr = reinterpret_cast<uint64_t>(page.at(0));
	auto seen = recorder.code_regions();
	EXPECT_TRUE(std::any_of(seen.begin(), seen.end(), [&](const Seen &r) {
		return r.addr == addr && r.flags == kMmap3CodeRegion;
	})) << "the load itself was not announced";
}

// perfjit_options::on_asked: a runtime that reports nothing until a
// recorder asks learns it from the library's thread, after the rundown,
// once per request; perfjit_asked() says so from then on. What it loads
// then is announced at once.
TEST_F(CodeRegion, OnAskedAfterEachRequest)
{
	session_.reset();
	struct Asked {
		std::atomic<int> calls{0};
		std::atomic<int> asked_then{-1};
		perfjit_session *s = nullptr;
	} asked;
	opts_ = options(PERFJIT_MODE_CODE_REGION, dir_.path());
	opts_.on_asked = [](void *arg) {
		auto *a = static_cast<Asked *>(arg);
		a->asked_then = perfjit_asked(a->s);
		a->calls++;
	};
	opts_.on_asked_arg = &asked;
	session_ = std::make_unique<perfjit::Session>(&opts_);
	ASSERT_TRUE(session_->ok()) << session_->error().message();
	asked.s = session_->get();
	EXPECT_EQ(session_->asked(), 0);
	std::this_thread::sleep_for(std::chrono::milliseconds(100));
	EXPECT_EQ(asked.calls.load(), 0) << "called with nobody recording";

	Recorder recorder;
	ASSERT_TRUE(recorder.ok()) << strerror(errno);
	ASSERT_TRUE(eventually([&] { return asked.calls.load() >= 1; }));
	EXPECT_EQ(asked.asked_then.load(), 1);
	EXPECT_EQ(session_->asked(), 1);
	ExecPage page;
	ASSERT_FALSE(session_->load("jit_after_ask", page.at(0), 16));
	auto seen = recorder.code_regions();
	EXPECT_TRUE(std::any_of(seen.begin(), seen.end(), [&](const Seen &r) {
		return r.addr == reinterpret_cast<uint64_t>(page.at(0)) &&
		       r.flags == kMmap3CodeRegion;
	})) << "a load after the callback was not announced at once";

	Recorder second;
	ASSERT_TRUE(second.ok());
	EXPECT_TRUE(eventually([&] { return asked.calls.load() >= 2; }));
}

// A runtime that answers on_asked with perfjit_rundown() (it loaded the
// code it had, as the callback's documentation says) gets no second call
// from that rundown: no recursion.
TEST_F(CodeRegion, OnAskedAnsweredWithARundown)
{
	session_.reset();
	struct Asked {
		int calls = 0;
		int inner = 1;
		perfjit_session *s = nullptr;
	} asked;
	opts_ = options(PERFJIT_MODE_CODE_REGION, dir_.path());
	opts_.flags = PERFJIT_OPEN_NO_THREAD;
	opts_.on_asked = [](void *arg) {
		auto *a = static_cast<Asked *>(arg);
		a->calls++;
		a->inner = perfjit_rundown(a->s);
	};
	opts_.on_asked_arg = &asked;
	session_ = std::make_unique<perfjit::Session>(&opts_);
	ASSERT_TRUE(session_->ok()) << session_->error().message();
	asked.s = session_->get();

	Recorder recorder;
	ASSERT_TRUE(recorder.ok()) << strerror(errno);
	struct pollfd pfd = {session_->rundown_fd(), POLLIN, 0};
	ASSERT_EQ(poll(&pfd, 1, 5000), 1);
	ASSERT_FALSE(session_->rundown());
	EXPECT_EQ(asked.calls, 1);
	EXPECT_EQ(asked.inner, 0);
}

// Each request gets a rundown: a recorder that asks again (perf record
// does when its buffer lost records) gets every live function again.
TEST_F(CodeRegion, RundownForEachRequest)
{
	perfjit::Session &s = *session_;
	constexpr size_t kFunctions = 50;
	ExecPage page;

	// Apart in memory (kAdjacentGap), so each its own rundown record.
	for (size_t i = 0; i < kFunctions; i++) {
		const std::string name = "jit_asked_" + std::to_string(i);

		ASSERT_FALSE(s.load(name.c_str(), page.at(i * 80), 16));
	}

	// The recorder asks on each of this process's threads: one rundown
	// or more, as the library's thread reads the eventfd.
	Recorder recorder;
	ASSERT_TRUE(recorder.ok()) << strerror(errno);
	std::map<uint64_t, int> rundowns;
	const auto count = [&] {
		rundowns.clear();
		for (const Seen &r : recorder.code_regions())
			if (r.flags & kMmap3Rundown)
				rundowns[r.addr]++;
	};
	const auto at_least = [&](const std::map<uint64_t, int> &before) {
		return rundowns.size() == kFunctions &&
		       std::all_of(rundowns.begin(), rundowns.end(), [&](const auto &kv) {
			       auto it = before.find(kv.first);
			       return kv.second > (it == before.end() ? 0 : it->second);
		       });
	};
	ASSERT_TRUE(eventually([&] {
		count();
		return at_least({});
	})) << rundowns.size()
	    << " of " << kFunctions;
	// Wait for the rundowns of this request to end, then ask again.
	std::map<uint64_t, int> first;
	do {
		first = rundowns;
		std::this_thread::sleep_for(std::chrono::milliseconds(500));
		count();
	} while (rundowns != first);
	recorder.ask();
	EXPECT_TRUE(eventually([&] {
		count();
		return at_least(first);
	})) << rundowns.size()
	    << " of " << kFunctions;
	EXPECT_EQ(recorder.lost(), 0u);
}

// A recorder stops, the runtime loads more (announced and stored: the
// library cannot tell that nobody records now), and another recorder
// starts: it gets all the live code, old and new.
TEST_F(CodeRegion, RecorderStopsAndAnotherStarts)
{
	perfjit::Session &s = *session_;
	ExecPage page;

	ASSERT_FALSE(s.load("jit_first", page.at(0), 16));
	{
		Recorder first;
		ASSERT_TRUE(first.ok());
		ASSERT_TRUE(eventually([&] { return stored(s.get(), page.at(0)); }));
	}
	ASSERT_FALSE(s.load("jit_between", page.at(64), 16));
	EXPECT_TRUE(eventually([&] { return stored(s.get(), page.at(64)); }));

	Recorder second;
	ASSERT_TRUE(second.ok());
	ASSERT_TRUE(eventually([&] { return stored(s.get(), page.at(64)); }));
	std::set<uint64_t> addrs;
	ASSERT_TRUE(eventually([&] {
		for (const Seen &r : second.code_regions())
			addrs.insert(r.addr);
		return addrs.size() == 2;
	}));
	EXPECT_EQ(addrs, (std::set<uint64_t>{reinterpret_cast<uint64_t>(page.at(0)),
					     reinterpret_cast<uint64_t>(page.at(64))}));
}

// Code loaded together and announced as one region is run down as two
// once one of them moved away.
TEST_F(CodeRegion, RundownAfterMove)
{
	perfjit::Session &s = *session_;
	ExecPage page;
	const perfjit_code a = code_at(page.at(0), "jit_stays", 16);
	const perfjit_code b = code_at(page.at(16), "jit_moves", 16);

	ASSERT_FALSE(s.load({&a, &b}));
	ASSERT_FALSE(s.move(page.at(16), page.at(64)));
	Recorder recorder;
	ASSERT_TRUE(recorder.ok());
	std::map<uint64_t, uint64_t> lens;
	ASSERT_TRUE(eventually([&] {
		for (const Seen &r : recorder.code_regions())
			lens[r.addr] = r.len;
		return lens.size() >= 2;
	}));
	EXPECT_EQ(lens,
		  (std::map<uint64_t, uint64_t>{{reinterpret_cast<uint64_t>(page.at(0)), 16},
						{reinterpret_cast<uint64_t>(page.at(64)), 16}}));
}

// One descriptor per process: its sessions all run down from the library's
// thread, or all from the runtime.
TEST_F(CodeRegion, ThreadModesDoNotMix)
{
	perfjit_options o = options(PERFJIT_MODE_CODE_REGION, dir_.path());
	perfjit_session *other = nullptr;

	o.flags = PERFJIT_OPEN_NO_THREAD;
	EXPECT_EQ(perfjit_open(&o, &other), -EINVAL);
	o.flags = 0;
	ASSERT_EQ(perfjit_open(&o, &other), 0);
	EXPECT_EQ(perfjit_rundown_fd(other), perfjit_rundown_fd(session_->get()));
	perfjit_close(other);
}

// Without the library's thread the runtime polls the descriptor and runs
// the rundown itself, at a point of its choosing.
TEST_F(CodeRegion, RundownByTheRuntime)
{
	session_.reset();
	open(PERFJIT_OPEN_NO_THREAD);
	perfjit::Session &s = *session_;
	ExecPage page;

	ASSERT_FALSE(s.load("jit_polled", page.at(0), 16));
	const int fd = s.rundown_fd();
	ASSERT_GE(fd, 0);
	struct pollfd pfd = {fd, POLLIN, 0};
	EXPECT_EQ(poll(&pfd, 1, 0), 0);

	Recorder recorder;
	ASSERT_TRUE(recorder.ok());
	ASSERT_EQ(poll(&pfd, 1, 10000), 1);
	// Nobody but the runtime runs the rundown.
	std::this_thread::sleep_for(std::chrono::milliseconds(100));
	EXPECT_FALSE(stored(s.get(), page.at(0)));
	EXPECT_FALSE(s.rundown());
	EXPECT_TRUE(stored(s.get(), page.at(0)));
	EXPECT_EQ(poll(&pfd, 1, 0), 0);
	ASSERT_EQ(recorder.code_regions().size(), 1u);
}

// A side file whose copy the library freed, removed with its pin too: the
// next rundown still announces the code, returns -ESTALE and tells the
// log, once; the rundowns after it do neither.
TEST_F(CodeRegion, SideFileLostWithItsPinIsToldOnce)
{
	struct Said {
		std::mutex lock;
		std::vector<std::string> lines;
	} said;
	// A process's sessions all have the library's thread or none.
	session_.reset();
	perfjit_options o = options(PERFJIT_MODE_CODE_REGION, dir_.path());
	o.flags = PERFJIT_OPEN_NO_THREAD;
	o.log = [](void *arg, int, const char *message) {
		auto *d = static_cast<Said *>(arg);
		std::lock_guard<std::mutex> guard(d->lock);

		d->lines.emplace_back(message);
	};
	o.log_arg = &said;
	perfjit::Session s(&o);
	ASSERT_TRUE(s.ok()) << s.error().message();
	ExecPage page;
	char path[4096];

	ASSERT_FALSE(s.load("jit_lost", page.at(0), 16));
	Recorder recorder;
	ASSERT_TRUE(recorder.ok());
	ASSERT_FALSE(s.rundown());
	ASSERT_EQ(perfjit_side_file(s.get(), page.at(0), path, sizeof(path)), 0);
	const std::string file = path, name = file.substr(file.rfind('/') + 1);
	const std::string hex = file.substr(file.rfind('/') - 2, 2) + name;
	ASSERT_EQ(unlink(file.c_str()), 0);
	ASSERT_EQ(std::system(("rm '" + dir_.path() + "/.build-id/.live/'*/" + hex).c_str()), 0)
		<< "no pin of " << hex;

	EXPECT_EQ(s.rundown(), perfjit::make_error(-ESTALE));
	EXPECT_FALSE(s.rundown()) << "told twice";
	std::lock_guard<std::mutex> guard(said.lock);
	EXPECT_EQ(std::count_if(said.lines.begin(), said.lines.end(),
				[](const std::string &l) {
					return l.find("missing or not whole") != std::string::npos;
				}),
		  1);
	const auto seen = recorder.code_regions();
	EXPECT_EQ(std::count_if(seen.begin(), seen.end(),
				[&](const Seen &r) {
					return r.addr == reinterpret_cast<uint64_t>(page.at(0)) &&
					       (r.flags & kMmap3Rundown);
				}),
		  3)
		<< "every rundown announces the code";
}

// A child of the test that loads @name at @addr into @s, its first call
// into the library there, says so, and waits for finish() to end: with
// exit(), whose handlers run, or _exit().
class HeldChild
{
public:
	HeldChild(perfjit::Session &s, const char *name, const void *addr, bool exit_handlers)
	{
		char c = 0;

		if (pipe(ready_) || pipe(go_))
			return;
		pid_ = fork();
		if (pid_ == 0) {
			const bool ok = !s.load(name, addr, 16);

			if (write(ready_[1], &c, 1) != 1 || read(go_[0], &c, 1) != 1)
				_exit(3);
			if (exit_handlers)
				exit(ok ? 0 : 2);
			_exit(ok ? 0 : 2);
		}
		if (pid_ > 0 && read(ready_[0], &c, 1) != 1)
			pid_ = -1;
	}
	HeldChild(const HeldChild &) = delete;
	HeldChild &operator=(const HeldChild &) = delete;
	~HeldChild()
	{
		finish();
		for (int fd : {ready_[0], ready_[1], go_[0], go_[1]})
			close(fd);
	}
	bool ok() const { return pid_ > 0; }
	pid_t pid() const { return pid_; }
	// Lets it end, and waits: whether it loaded and exited 0.
	bool finish()
	{
		int status = 0;

		if (pid_ <= 0 || write(go_[1], "g", 1) != 1 || waitpid(pid_, &status, 0) != pid_)
			return false;
		pid_ = -1;
		return WIFEXITED(status) && WEXITSTATUS(status) == 0;
	}

private:
	int ready_[2] = {-1, -1}, go_[2] = {-1, -1};
	pid_t pid_ = -1;
};

// After fork() the child has the parent's code, and its own registration:
// a recorder of the child gets the child's rundown of that code.
TEST_F(CodeRegion, ChildRundown)
{
	perfjit::Session &s = *session_;
	ExecPage page;

	ASSERT_FALSE(s.load("jit_inherited", page.at(0), 16));
	// The child's first call makes its own registration and thread.
	HeldChild child(s, "jit_child", page.at(64), false);
	ASSERT_TRUE(child.ok());
	{
		Recorder recorder(child.pid());
		ASSERT_TRUE(recorder.ok());
		EXPECT_TRUE(eventually([&] {
			auto seen = recorder.code_regions();
			return std::any_of(seen.begin(), seen.end(), [&](const Seen &r) {
				return r.pid == static_cast<uint32_t>(child.pid()) &&
				       r.addr == reinterpret_cast<uint64_t>(page.at(0)) &&
				       (r.flags & kMmap3Rundown);
			});
		}));
	}
	EXPECT_TRUE(child.finish());
}

// The files under @dir/.build-id/.live/*/ but the sessions' locks: the
// side files pinned.
size_t pins_in(const std::string &dir)
{
	const std::string cmd =
		"find '" + dir +
		"/.build-id/.live' -mindepth 2 -type f ! -name lock 2>/dev/null | wc -l";

	return std::stoul(run_output(cmd));
}

// A process that exits without perfjit_close() removes its pins in exit():
// its code ends with it. A child that exits before it ever called the
// library leaves its parent's.
TEST_F(CodeRegion, PinsGoAtExit)
{
	perfjit::Session &s = *session_;
	ExecPage page;
	const auto live_dirs = [&] {
		return run_output("find '" + dir_.path() +
				  "/.build-id/.live' -mindepth 1 -maxdepth 1 -type d | wc -l");
	};

	ASSERT_FALSE(s.load("jit_parent", page.at(0), 16));
	Recorder recorder;
	ASSERT_TRUE(recorder.ok());
	ASSERT_TRUE(eventually([&] { return pins_in(dir_.path()) == 1; }))
		<< "the parent's side file was not pinned";
	pid_t child = fork();
	ASSERT_GE(child, 0);
	if (child == 0)
		exit(0);
	int status = 0;
	ASSERT_EQ(waitpid(child, &status, 0), child);
	EXPECT_EQ(pins_in(dir_.path()), 1u) << "a child's exit() removed its parent's pins";

	HeldChild exits(s, "jit_exits", page.at(64), true);
	ASSERT_TRUE(exits.ok());
	{
		Recorder asks(exits.pid());
		ASSERT_TRUE(asks.ok());
		// Its own code's file, and the one of the code it inherited.
		EXPECT_TRUE(eventually([&] { return pins_in(dir_.path()) == 3; }))
			<< "the child's side files were not pinned";
	}
	EXPECT_TRUE(exits.finish());
	EXPECT_EQ(pins_in(dir_.path()), 1u) << "the child's pins outlived it";
	EXPECT_EQ(live_dirs(), "1\n");
}

// The runtime unloads and loads code while rundowns run: in the time order
// of the records, no rundown announces code after its unload, before it
// was loaded again.
TEST_F(CodeRegion, UnloadDuringRundown)
{
	perfjit::Session &s = *session_;
	ExecPage page;
	constexpr int kSlots = 16;

	for (int i = 0; i < kSlots; i++)
		ASSERT_FALSE(s.load("jit_slot", page.at(i * 32), 16));
	Recorder recorder(getpid(), 1024);
	ASSERT_TRUE(recorder.ok());

	std::atomic<bool> stop{false};
	std::thread rundowns([&] {
		while (!stop.load())
			perfjit_rundown(s.get());
	});
	for (int round = 0; round < 200; round++) {
		const int i = round % kSlots;

		ASSERT_FALSE(s.unload(page.at(i * 32)));
		ASSERT_FALSE(s.load("jit_slot", page.at(i * 32), 16));
	}
	stop = true;
	rundowns.join();

	std::map<uint64_t, bool> live;
	std::map<uint64_t, uint64_t> unloaded_at;
	size_t rundown_records = 0;
	for (const Seen &r : recorder.code_regions()) {
		if (r.flags & kMmap3Unmap) {
			live[r.addr] = false;
			unloaded_at[r.addr] = r.time;
		} else if (r.flags & kMmap3Rundown) {
			auto it = live.find(r.addr);

			rundown_records++;
			// The first record of code loaded before the recorder.
			// Records of one time stamp have no order between them.
			if (it == live.end())
				live[r.addr] = true;
			else
				EXPECT_TRUE(it->second || unloaded_at[r.addr] == r.time)
					<< "a rundown of code after its unload: at " << r.time
					<< " ns, the unload at " << unloaded_at[r.addr] << " ns";
		} else {
			live[r.addr] = true;
		}
	}
	EXPECT_GT(rundown_records, 0u);
}

// A rundown of 100,000 live functions, loaded in batches: one side file and
// one region per batch of adjacent code.
TEST_F(CodeRegion, RundownOf100000Functions)
{
	perfjit::Session &s = *session_;
	constexpr size_t kFunctions = 100000, kBatch = 1000, kSize = 16;
	const size_t len = kFunctions * kSize;
	void *mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(mem, MAP_FAILED);
	auto *code = static_cast<uint8_t *>(mem);
	for (size_t i = 0; i < kFunctions; i++) {
		memcpy(code + i * kSize, kCode, 6);
		memcpy(code + i * kSize + 6, &i, sizeof(uint32_t));
	}
	ASSERT_EQ(mprotect(mem, len, PROT_READ | PROT_EXEC), 0);

	std::vector<std::string> names(kFunctions);
	std::vector<perfjit_code> codes(kFunctions);
	for (size_t i = 0; i < kFunctions; i++) {
		names[i] = "jit_f" + std::to_string(i);
		codes[i] = code_at(code + i * kSize, names[i].c_str(), kSize);
	}
	for (size_t b = 0; b < kFunctions; b += kBatch) {
		std::vector<const perfjit_code *> batch;

		for (size_t i = b; i < b + kBatch; i++)
			batch.push_back(&codes[i]);
		ASSERT_FALSE(s.load(batch));
	}

	Recorder recorder;
	ASSERT_TRUE(recorder.ok());
	EXPECT_TRUE(eventually([&] { return stored(s.get(), code + len - kSize); }));
	std::set<uint64_t> covered;
	uint64_t bytes = 0;
	const auto seen = recorder.code_regions();
	for (const Seen &r : seen) {
		if (covered.insert(r.addr).second)
			bytes += r.len;
	}
	EXPECT_EQ(covered.size(), kFunctions / kBatch);
	EXPECT_EQ(bytes, len);
	munmap(mem, len);
}
