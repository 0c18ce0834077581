// SPDX-License-Identifier: LGPL-2.1-or-later
// Side files: the ELF image perf reads a JIT region's code, symbol, line
// and unwind tables from, stored in perf's build-id cache.
#ifndef PERFJIT_SIDE_FILE_HPP
#define PERFJIT_SIDE_FILE_HPP

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "perfjit.h"

namespace perfjit
{

using BuildId = std::array<uint8_t, 20>;

// The file offset, and virtual address, of the code in every side file:
// the ELF header and one program header, rounded up to 16.
constexpr uint64_t kTextOffset = 128;

// What a side file holds: a copy of what was announced, kept so that the
// file can be written later, when a recorder appears.
struct CodeImage {
	std::string name;
	uint32_t generation = 0;
	std::vector<uint8_t> code;
	std::string source_file;
	std::vector<perfjit_line> lines;
	std::vector<uint8_t> eh_frame;

	// Copies @c; -EINVAL for bad arguments.
	static int from(const perfjit_code &c, CodeImage &out);
};

// SHA-1 over what makes the code distinct: name, generation, code bytes,
// line table and unwind table. Identical code with another name, or another
// generation of the same method, gets another build-id.
BuildId build_id_of(const CodeImage &image);

std::string build_id_hex(const BuildId &id);

// <dir>/.build-id/xx/yyy...
std::string side_file_path(const std::string &buildid_dir, const BuildId &id);

// The ELF image of @image, whose build-id is @id.
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

// Stores the side file at side_file_path(), atomically: a temporary file
// linked into place. A file already there is left alone. Returns 0 or a
// negative errno, and never leaves a partial file behind.
int store_side_file(const std::string &buildid_dir, const CodeImage &image, const BuildId &id,
		    DirCache *dirs = nullptr);

} // namespace perfjit

#endif
