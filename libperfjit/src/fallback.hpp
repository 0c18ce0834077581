// SPDX-License-Identifier: LGPL-2.1-or-later
// The announcements for kernels without PR_PERF_CODE_REGION:
// /tmp/perf-PID.map lines, or a jitdump file for perf inject --jit.
#ifndef PERFJIT_FALLBACK_HPP
#define PERFJIT_FALLBACK_HPP

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "side_file.hpp"
#include "util.hpp"

namespace perfjit
{

struct FileCloser {
	void operator()(FILE *f) const { fclose(f); }
};

class PerfMap
{
public:
	// Opens /tmp/perf-<pid>.map for appending.
	int open(const std::string &dir = "/tmp");
	int load(uint64_t addr, uint64_t len, const std::string &name);
	const std::string &path() const { return path_; }

private:
	std::unique_ptr<FILE, FileCloser> file_;
	std::string path_;
};

// The jitdump format of tools/perf/Documentation/jitdump-specification.txt,
// with CLOCK_MONOTONIC timestamps (perf record -k 1).
class Jitdump
{
public:
	Jitdump() = default;
	Jitdump(const Jitdump &) = delete;
	Jitdump &operator=(const Jitdump &) = delete;
	~Jitdump();

	// Creates <dir>/jit-<pid>.dump, writes the header and maps the file
	// executable, which is how perf inject finds it in perf.data.
	int open(const std::string &dir);
	// @index: the code index the load got, which a move refers to.
	int load(uint64_t addr, const CodeImage &image, uint64_t &index);
	int move(uint64_t from, uint64_t to, uint64_t len, uint64_t index);
	int close();
	const std::string &path() const { return path_; }

private:
	int write_record(const void *rec, size_t len, const void *tail = nullptr,
			 size_t tail_len = 0);
	int write_debug_info(uint64_t addr, const CodeImage &image);
	int write_unwinding_info(const CodeImage &image);

	UniqueFd fd_;
	void *marker_ = nullptr;
	size_t marker_len_ = 0;
	uint64_t code_index_ = 0;
	std::string path_;
};

uint64_t monotonic_ns();

} // namespace perfjit

#endif
