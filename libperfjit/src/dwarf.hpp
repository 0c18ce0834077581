// SPDX-License-Identifier: LGPL-2.1-or-later
// The DWARF that lets perf annotate and addr2line map JIT code to source
// lines: a compile unit with a line program per function.
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

// Appends to .debug_info, .debug_line (DWARF 4) and .debug_aranges a unit
// for @image's line table, with its code at @text_addr; the first call also
// writes .debug_abbrev.
void append_line_info(DwarfSections &out, const CodeImage &image, uint64_t text_addr);

} // namespace perfjit

#endif
