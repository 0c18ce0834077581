// SPDX-License-Identifier: LGPL-2.1-or-later
// The DWARF that lets perf annotate and addr2line map JIT code to source
// lines: one compile unit with a line program.
#ifndef PERFJIT_DWARF_HPP
#define PERFJIT_DWARF_HPP

#include <cstdint>
#include <vector>

namespace perfjit
{

struct CodeImage;

struct DwarfSections {
	std::vector<uint8_t> abbrev;
	std::vector<uint8_t> info;
	std::vector<uint8_t> line;
	std::vector<uint8_t> aranges;
};

// .debug_abbrev, .debug_info, .debug_line (DWARF 4) and .debug_aranges
// for @image's line table, with its code at @text_addr.
DwarfSections encode_line_info(const CodeImage &image, uint64_t text_addr);

} // namespace perfjit

#endif
