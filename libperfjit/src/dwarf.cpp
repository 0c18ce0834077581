// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Hand-encoded rather than produced with libdwarf's producer: Debian 12's
// libdwarf has no producer library (libdwarfp), and elfutils only reads
// DWARF. What is needed is small: a compile unit and a line program for
// each function.
#include "dwarf.hpp"

#include <cstring>
#include <string>

#include "side_file.hpp"

namespace perfjit
{

namespace
{

class Writer
{
public:
	std::vector<uint8_t> bytes;

	void u8(uint8_t v) { bytes.push_back(v); }
	void u16(uint16_t v) { raw(&v, sizeof(v)); }
	void u32(uint32_t v) { raw(&v, sizeof(v)); }
	void u64(uint64_t v) { raw(&v, sizeof(v)); }
	void str(const std::string &s) { raw(s.c_str(), s.size() + 1); }
	void raw(const void *p, size_t n)
	{
		const auto *b = static_cast<const uint8_t *>(p);
		bytes.insert(bytes.end(), b, b + n);
	}
	void uleb(uint64_t v)
	{
		do {
			uint8_t b = v & 0x7f;

			v >>= 7;
			u8(v ? (b | 0x80) : b);
		} while (v);
	}
	void sleb(int64_t v)
	{
		bool more = true;

		while (more) {
			uint8_t b = v & 0x7f;

			v >>= 7;
			more = !((v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40)));
			u8(more ? (b | 0x80) : b);
		}
	}
	size_t size() const { return bytes.size(); }
	void patch32(size_t at, uint32_t v) { memcpy(&bytes[at], &v, sizeof(v)); }
};

enum : uint8_t {
	DW_TAG_compile_unit = 0x11,
	DW_AT_name = 0x03,
	DW_AT_stmt_list = 0x10,
	DW_AT_low_pc = 0x11,
	DW_AT_high_pc = 0x12,
	DW_AT_language = 0x13,
	DW_AT_producer = 0x25,
	DW_FORM_addr = 0x01,
	DW_FORM_data2 = 0x05,
	DW_FORM_data8 = 0x07,
	DW_FORM_string = 0x08,
	DW_FORM_sec_offset = 0x17,
	DW_LNS_copy = 0x01,
	DW_LNS_advance_pc = 0x02,
	DW_LNS_advance_line = 0x03,
	DW_LNS_set_column = 0x05,
	DW_LNE_end_sequence = 0x01,
	DW_LNE_set_address = 0x02,
};

constexpr uint16_t DW_LANG_Mips_Assembler = 0x8001;

} // namespace

void append_line_info(DwarfSections &out, const CodeImage &image, uint64_t text_addr)
{
	const std::string &file = image.source_file;
	const size_t slash = file.rfind('/');
	const std::string dir =
		slash == std::string::npos ? "." : file.substr(0, slash ? slash : 1);
	const std::string base = slash == std::string::npos ? file : file.substr(slash + 1);

	// The units share one abbreviation, at offset 0.
	const auto info_at = static_cast<uint32_t>(out.info.size());
	const auto line_at = static_cast<uint32_t>(out.line.size());
	if (out.abbrev.empty()) {
		Writer abbrev;
		abbrev.uleb(1);
		abbrev.uleb(DW_TAG_compile_unit);
		abbrev.u8(0); // no children
		for (auto [at, form] : {std::pair<uint8_t, uint8_t>{DW_AT_producer, DW_FORM_string},
					{DW_AT_language, DW_FORM_data2},
					{DW_AT_name, DW_FORM_string},
					{DW_AT_stmt_list, DW_FORM_sec_offset},
					{DW_AT_low_pc, DW_FORM_addr},
					{DW_AT_high_pc, DW_FORM_data8}}) {
			abbrev.uleb(at);
			abbrev.uleb(form);
		}
		abbrev.u16(0);
		abbrev.u8(0);
		out.abbrev = std::move(abbrev.bytes);
	}

	Writer info;
	info.u32(0); // unit_length, patched
	info.u16(4);
	info.u32(0); // .debug_abbrev offset
	info.u8(8);
	info.uleb(1);
	info.str("libperfjit");
	info.u16(DW_LANG_Mips_Assembler);
	info.str(file);
	info.u32(line_at); // .debug_line offset
	info.u64(text_addr);
	info.u64(image.code.size());
	info.patch32(0, info.size() - 4);
	out.info.insert(out.info.end(), info.bytes.begin(), info.bytes.end());

	Writer line;
	line.u32(0); // unit_length, patched
	line.u16(4);
	line.u32(0); // header_length, patched
	const size_t header_start = line.size();
	line.u8(1);			   // minimum_instruction_length
	line.u8(1);			   // maximum_operations_per_instruction
	line.u8(1);			   // default_is_stmt
	line.u8(static_cast<uint8_t>(-5)); // line_base
	line.u8(14);			   // line_range
	line.u8(13);			   // opcode_base
	for (uint8_t len : {0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1})
		line.u8(len);
	line.str(dir);
	line.u8(0);
	line.str(base);
	line.uleb(1); // directory
	line.uleb(0); // mtime
	line.uleb(0); // length
	line.u8(0);
	line.patch32(6, line.size() - header_start);

	line.u8(0);
	line.uleb(9);
	line.u8(DW_LNE_set_address);
	line.u64(text_addr);
	uint64_t addr = 0;
	int64_t cur_line = 1;
	for (const auto &row : image.lines) {
		if (row.offset > addr) {
			line.u8(DW_LNS_advance_pc);
			line.uleb(row.offset - addr);
			addr = row.offset;
		}
		if (static_cast<int64_t>(row.line) != cur_line) {
			line.u8(DW_LNS_advance_line);
			line.sleb(static_cast<int64_t>(row.line) - cur_line);
			cur_line = row.line;
		}
		line.u8(DW_LNS_set_column);
		line.uleb(row.column);
		line.u8(DW_LNS_copy);
	}
	if (image.code.size() > addr) {
		line.u8(DW_LNS_advance_pc);
		line.uleb(image.code.size() - addr);
	}
	line.u8(0);
	line.uleb(1);
	line.u8(DW_LNE_end_sequence);
	line.patch32(0, line.size() - 4);
	out.line.insert(out.line.end(), line.bytes.begin(), line.bytes.end());

	// Lets readers find the unit by address without scanning .debug_info.
	Writer aranges;
	aranges.u32(0); // unit_length, patched
	aranges.u16(2);
	aranges.u32(info_at); // .debug_info offset
	aranges.u8(8);
	aranges.u8(0);
	aranges.u32(0); // padding to a multiple of the tuple size
	aranges.u64(text_addr);
	aranges.u64(image.code.size());
	aranges.u64(0);
	aranges.u64(0);
	aranges.patch32(0, aranges.size() - 4);
	out.aranges.insert(out.aranges.end(), aranges.bytes.begin(), aranges.bytes.end());
}

} // namespace perfjit
