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

// The process's jitdump file (jit-<pid>.dump), shared by its jitdump
// sessions: one header, one code index, the records of one load together.
// Written and closed (the JIT_CODE_CLOSE record) by the process that
// created it; a child of fork() that drops it leaves it alone.
struct JitdumpFile;

// The jitdump format of tools/perf/Documentation/jitdump-specification.txt,
// with CLOCK_MONOTONIC timestamps (perf record -k 1).
class Jitdump
{
public:
	// Opens <dir>/jit-<pid>.dump: creates it, writes the header and maps
	// the file executable (which is how perf inject finds it in
	// perf.data), or shares the one another session of the process has.
	int open(const std::string &dir);
	// @index: the code index the load got, which a move refers to.
	int load(uint64_t addr, const CodeImage &image, uint64_t &index);
	int move(uint64_t from, uint64_t to, uint64_t len, uint64_t index);
	// This session's part: the last to close writes JIT_CODE_CLOSE.
	void close();
	const std::string &path() const;

private:
	std::shared_ptr<JitdumpFile> file_;
};

uint64_t monotonic_ns();

} // namespace perfjit

#endif
