// SPDX-License-Identifier: LGPL-2.1-or-later
// Side files: the ELF image perf reads a JIT region's code, symbol, line
// and unwind tables from, stored in perf's build-id cache.
#ifndef PERFJIT_SIDE_FILE_HPP
#define PERFJIT_SIDE_FILE_HPP

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <vector>

#include "perfjit.h"
#include "util.hpp"

namespace perfjit
{

using BuildId = std::array<uint8_t, 20>;

// The file offset, and virtual address, of the code in every side file:
// the ELF header and one program header, rounded up to 16.
constexpr uint64_t kTextOffset = 128;

// The type of the side file's ".note.perfjit" note (name "perfjit") that
// gives each function's generation, so that perf report can show and sort
// by it, and perf archive and debuginfod keep it with the code.
constexpr uint32_t kGenerationsNoteType = 1;

// What a side file holds: a copy of what was announced, kept so that the
// file can be written later, when a recorder appears.
struct CodeImage {
	std::string name;
	uint32_t generation = 0;
	std::vector<uint8_t> code;
	std::string source_file;
	std::vector<perfjit_line> lines;
	std::vector<uint8_t> eh_frame;
	struct Inline {
		uint64_t start, end;
		std::string name, file;
		uint32_t call_line, depth;
	};
	std::vector<Inline> inlines; // as perfjit_code::inlines, validated
	// Where the code was announced; it decides a pack's layout, not what
	// is hashed into the build-id of a function's own side file.
	uint64_t addr = 0;

	// Copies @c; -EINVAL for bad arguments.
	static int from(const perfjit_code &c, CodeImage &out);
};

// SHA-1 over what makes the code distinct: name, generation, code bytes,
// line table, unwind table and inlining. Identical code with another name, or another
// generation of the same method, gets another build-id.
BuildId build_id_of(const CodeImage &image);

// Several functions can share one side file, a pack: one file to write and
// for perf to open instead of one per function. Each function's code sits at
// its own offset (file offset == address, from kTextOffset), and perf
// reaches it through the region's pgoff.
using Pack = std::vector<CodeImage>;

// Whether @next follows @prev in memory, closer than kAdjacentGap: a pack
// then keeps the distance between them, so that one code region, one map
// in perf, can cover both.
constexpr uint64_t kAdjacentGap = 64;
bool adjacent(const CodeImage &prev, const CodeImage &next);
// The same of code loaded at @prev_addr, @prev_len bytes, and at @next_addr.
bool adjacent(uint64_t prev_addr, uint64_t prev_len, uint64_t next_addr);

// Where each function of @pack sits in its side file: after the one before
// it at their distance in memory if adjacent(), else at the next 16-byte
// boundary.
std::vector<uint64_t> pack_layout(const Pack &pack);

// Where pack[offsets.size()] sits, given where those before it do: the
// layout only appends, so a function keeps its offset while more are
// added after it.
uint64_t pack_next_offset(const Pack &pack, const std::vector<uint64_t> &offsets);

// A build-id for a pack that is still being filled: not a hash of what the
// file will hold, which is not known when its first function is announced,
// but unique (the process, the time, a counter and random bytes) and
// stable, as a build-id must be to name a file.
BuildId unique_build_id();

// The build-id of a side file holding @pack: build_id_of() for a single
// function, else a SHA-1 over the build-ids of the functions and their
// offsets, in order.
BuildId build_id_of(const Pack &pack);

// Whether @image's unwind table can move into a pack: the address of each
// FDE's code must be encoded absolute or pc-relative, with no personality
// routine or LSDA. Functions whose table cannot move get a file each.
bool eh_frame_relocatable(const CodeImage &image);

// The .eh_frame_hdr (version 1, with its sorted search table) of @eh_frame
// placed at address @eh_addr, for the header placed at @hdr_addr: what
// libunwind and libdw look up FDEs with. Empty if the table cannot be read
// or an address does not fit the header's 32-bit encoding.
std::vector<uint8_t> make_eh_frame_hdr(const std::vector<uint8_t> &eh_frame, uint64_t eh_addr,
				       uint64_t hdr_addr);

std::string build_id_hex(const BuildId &id);

// <dir>/.build-id/xx/yyy...
std::string side_file_path(const std::string &buildid_dir, const BuildId &id);

// The ELF image of @pack (or of the single @image), whose build-id is @id.
int make_elf(const Pack &pack, const BuildId &id, std::vector<uint8_t> &out);
int make_elf(const CodeImage &image, const BuildId &id, std::vector<uint8_t> &out);

// The .build-id/xx directories known to exist, so that they are created
// once per session rather than once per file.
class DirCache
{
public:
	bool has(uint8_t prefix) const { return known_[prefix]; }
	void add(uint8_t prefix) { known_[prefix] = true; }

private:
	std::array<bool, 256> known_{};
};

class Pins;

// Stores the side file at side_file_path(), atomically: a temporary file,
// synced, renamed into place. A file already there whose build-id note
// says @id is not rewritten, but its time is set to now, so that a
// directory's bound (DirBound) removes it last; one that a bound removed,
// or one torn by a crash, is written again. Returns 0 or a negative errno,
// with what failed in *@why, and never leaves a partial file behind.
// *@written, if given, is the size of the file this call put there, else 0.
// With @pins, the file is pinned before it gets its name, so that no bound
// sees it unpinned; *@pinned says whether it is (a pin to undo with
// Pins::unpin()).
int store_side_file(const std::string &buildid_dir, const Pack &pack, const BuildId &id,
		    DirCache *dirs = nullptr, uint64_t *written = nullptr,
		    std::string *why = nullptr, Pins *pins = nullptr, bool *pinned = nullptr);
int store_side_file(const std::string &buildid_dir, const CodeImage &image, const BuildId &id,
		    DirCache *dirs = nullptr);

// For a stored side file whose content is no longer kept: sets its time to
// now, as store_side_file() does, if it is there and whole (or another
// user's that cannot be read, taken as it is). 0, or -ENOENT.
int refresh_side_file(const std::string &buildid_dir, const BuildId &id);

// Whether the file at @path is an ELF file whose GNU build-id note says
// @id: whole, as perf would take it.
bool side_file_intact(const std::string &path, const BuildId &id);

// Keeps the side files of a build-id directory under a size: the apparent
// size of the regular files named by a 20-byte build-id under .build-id/xx/
// (perf's own cache entries are symbolic links there, and are neither
// counted nor removed). Past the bound, the oldest by modification time go
// first, until the files take 7/8 of it, but for the build-ids to keep. A
// writer counts what it writes, and measures the directory again when its
// count reaches the bound: the first write measures it.
class DirBound
{
public:
	// @max: the bound in bytes, 0 for none.
	explicit DirBound(uint64_t max = 0) : max_(max) {}
	DirBound(const DirBound &) = delete;
	DirBound &operator=(const DirBound &) = delete;

	void set_max(uint64_t max) { max_ = max; }
	uint64_t max() const { return max_; }

	// Counts @bytes just written into the directory. Any thread.
	void add(uint64_t bytes) { room_.fetch_sub(static_cast<int64_t>(bytes)); }
	// Whether the directory is due to be measured, and pruned if need be.
	bool due() const { return max_ && room_.load() < 0; }

	struct Result {
		uint64_t bytes = 0;	    // of side files, after the prune
		size_t removed = 0;	    // files removed
		uint64_t removed_bytes = 0; // their size
	};
	// The build-ids to keep, sorted; asked for after the directory was
	// read, so that a file stored later is not in the list to remove.
	using Keep = std::function<std::vector<BuildId>()>;
	// Measures @buildid_dir and removes the oldest side files past the
	// bound, never one whose build-id @keep gives, one that a session
	// pinned (Pins), nor one whose time changed since it was read
	// (stored again, or refreshed, meanwhile). The pins of sessions that
	// ended are removed first.
	// Temporary files that a writer killed while writing left behind are
	// removed after an hour. One caller at a time. 0, or a negative errno
	// if the directory cannot be read.
	int prune(const std::string &buildid_dir, const Keep &keep, Result *result = nullptr);
	// What is written, at least, between two measures.
	static constexpr uint64_t kMinRemeasure = 64 << 10;

private:
	uint64_t max_;
	// What may be written before the next measure; below 0: due.
	std::atomic<int64_t> room_{0};
};

// Hard links to the side files of one session's live code, so that no
// bound removes them while the code runs: DirBound::prune() leaves a file
// with more than one link. They are in a directory of the session's own,
// <dir>/.build-id/.live/<pid>-<random>, whose "lock" file the session
// holds flock()ed; a prune removes the directory of a session that ended
// without removing it (a process killed). A file that something removed
// anyway (rm, an older bound) is linked back from its pin. Any thread.
// A directory that cannot be made (another user's .live, say) leaves
// nothing pinned: the session keeps its code in memory instead.
class Pins
{
public:
	Pins() = default;
	Pins(const Pins &) = delete;
	Pins &operator=(const Pins &) = delete;
	~Pins() { close(); }

	// Creates the session's directory, once. 0 or a negative errno, with
	// what failed in *@why.
	int open(const std::string &buildid_dir, std::string *why = nullptr);
	bool is_open() const;
	// Pins the side file of @id by linking @path (the side file, or the
	// temporary file about to be renamed to it), unless a pin of @id is
	// held already: each pin() that returns 0 is undone by one unpin().
	// -EBADF without a directory, -ENOENT if @path is gone, -EPERM for
	// another user's file under fs.protected_hardlinks.
	int pin(const BuildId &id, const std::string &path);
	void unpin(const BuildId &id) noexcept;
	// Links the side file of @id back from its pin: 0, or -ENOENT if it
	// is not pinned.
	int restore(const BuildId &id);
	// Removes the directory (the destructor does too); pins nothing after.
	// In a process other than the one that opened it, only forgets it.
	void close();
	// Around fork(), from the library's fork handlers: the pins are not
	// being changed when the process is copied. In the child, the
	// directory and its pins are the parent's, never changed from there.
	void before_fork();
	void after_fork_in_parent();
	void after_fork_in_child();

	// Removes the directories of sessions that ended; see DirBound::prune().
	static void remove_ended(const std::string &buildid_dir);

private:
	void forget_locked();

	mutable std::mutex lock_;
	std::map<BuildId, unsigned> held_; // pins of each build-id
	pid_t owner_ = 0;
	std::string buildid_dir_;
	std::string path_;
	UniqueFd dir_;
	UniqueFd lock_fd_;
};

// The file whose read-only mapping tells a recorder where the process
// stores its side files: <dir>/.build-id/.code-regions. perf record, run as
// another user or outside the process's mount namespace, finds it in
// /proc/PID/maps and takes the side files that got samples from its
// directory (tools/perf/Documentation/jit-interface.txt).
class DirMarker
{
public:
	DirMarker() = default;
	DirMarker(const DirMarker &) = delete;
	DirMarker &operator=(const DirMarker &) = delete;
	~DirMarker();

	// Creates the file if needed and maps it, once. 0 or a negative errno.
	int map(const std::string &buildid_dir);

private:
	void *addr_ = nullptr;
	size_t len_ = 0;
};

} // namespace perfjit

#endif
