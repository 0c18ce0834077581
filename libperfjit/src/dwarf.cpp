// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Hand-encoded rather than produced with libdwarf's producer: Debian 12's
// libdwarf has no producer library (libdwarfp), and elfutils only reads
// DWARF. What is needed is small: a compile unit and a line program for
// each function, and the function's inlined calls.
#include "dwarf.hpp"

#include <algorithm>
#include <cstring>
#include <dwarf.h>
#include <map>
#include <string>

#include "byte_writer.hpp"
#include "side_file.hpp"

namespace perfjit
{

namespace
{

using Writer = ByteWriter;

// The abbreviations every unit shares, at offset 0 of .debug_abbrev.
enum Abbrev : uint8_t {
	kUnit = 1,	  // a compile unit with a line table only
	kUnitParent = 2,  // ... with the function and its inlining
	kAbstract = 3,	  // an inlined function: its name
	kFunction = 4,	  // the function announced
	kInlinedCall = 5, // one inlined call
};

using AttrForms = std::vector<std::pair<uint8_t, uint8_t>>;

void abbrev_entry(Writer &w, uint8_t code, uint8_t tag, uint8_t children, const AttrForms &attrs)
{
	w.uleb(code);
	w.uleb(tag);
	w.u8(children);
	for (auto [at, form] : attrs) {
		w.uleb(at);
		w.uleb(form);
	}
	w.u16(0);
}

std::vector<uint8_t> abbrev_table()
{
	const AttrForms unit = {
		{DW_AT_producer, DW_FORM_string}, {DW_AT_language, DW_FORM_data2},
		{DW_AT_name, DW_FORM_string},	  {DW_AT_stmt_list, DW_FORM_sec_offset},
		{DW_AT_low_pc, DW_FORM_addr},	  {DW_AT_high_pc, DW_FORM_data8}};
	Writer w;

	abbrev_entry(w, kUnit, DW_TAG_compile_unit, DW_CHILDREN_no, unit);
	abbrev_entry(w, kUnitParent, DW_TAG_compile_unit, DW_CHILDREN_yes, unit);
	abbrev_entry(w, kAbstract, DW_TAG_subprogram, DW_CHILDREN_no,
		     {{DW_AT_name, DW_FORM_string}, {DW_AT_inline, DW_FORM_data1}});
	abbrev_entry(w, kFunction, DW_TAG_subprogram, DW_CHILDREN_yes,
		     {{DW_AT_name, DW_FORM_string},
		      {DW_AT_low_pc, DW_FORM_addr},
		      {DW_AT_high_pc, DW_FORM_data8}});
	abbrev_entry(w, kInlinedCall, DW_TAG_inlined_subroutine, DW_CHILDREN_yes,
		     {{DW_AT_abstract_origin, DW_FORM_ref4},
		      {DW_AT_low_pc, DW_FORM_addr},
		      {DW_AT_high_pc, DW_FORM_data8},
		      {DW_AT_call_file, DW_FORM_udata},
		      {DW_AT_call_line, DW_FORM_udata}});
	w.u8(0);
	return std::move(w.bytes);
}

// The line program's files: the function's own, 1, then those of inlined
// code. Each with the index of its directory.
struct FileTable {
	std::vector<std::string> dirs;
	std::vector<std::pair<std::string, uint64_t>> files;
	std::map<std::string, uint64_t> index;

	uint64_t add(const std::string &name)
	{
		// An empty name would end the header's list of files.
		const std::string path = name.empty() ? "unknown" : name;
		auto it = index.find(path);

		if (it != index.end())
			return it->second;
		const size_t slash = path.rfind('/');
		const std::string dir =
			slash == std::string::npos ? "." : path.substr(0, slash ? slash : 1);
		std::string base = slash == std::string::npos ? path : path.substr(slash + 1);

		if (base.empty())
			base = "unknown"; // "dir/": an empty name ends the list
		auto d = std::find(dirs.begin(), dirs.end(), dir);
		if (d == dirs.end())
			d = dirs.insert(dirs.end(), dir);
		files.emplace_back(base, d - dirs.begin() + 1);
		return index[path] = files.size();
	}
};

// The file index of each inlined call's own code: its file, else its
// caller's.
std::vector<uint64_t> inline_files(const CodeImage &image, FileTable &files)
{
	std::vector<uint64_t> out, callers{files.add(image.source_file)};

	for (const auto &in : image.inlines) {
		callers.resize(in.depth);
		out.push_back(in.file.empty() ? callers.back() : files.add(in.file));
		callers.push_back(out.back());
	}
	return out;
}

// The file of the innermost inlined call at @offset (the last in order
// that holds it, as callers come first), else the function's.
uint64_t file_at(const CodeImage &image, const std::vector<uint64_t> &inline_file, uint64_t offset)
{
	uint64_t file = 1;

	for (size_t i = 0; i < image.inlines.size() && image.inlines[i].start <= offset; i++) {
		if (offset < image.inlines[i].end)
			file = inline_file[i];
	}
	return file;
}

// The .debug_info children of the unit: the inlined functions' abstract
// entries, then the function with its inlined calls nested as in @image.
void append_inlining(Writer &info, size_t unit_start, const CodeImage &image, uint64_t text_addr,
		     FileTable &files)
{
	std::map<std::string, uint32_t> origin;

	for (const auto &in : image.inlines) {
		if (origin.count(in.name))
			continue;
		origin[in.name] = static_cast<uint32_t>(info.size() - unit_start);
		info.uleb(kAbstract);
		info.str(in.name);
		info.u8(DW_INL_inlined);
	}
	info.uleb(kFunction);
	info.str(image.name);
	info.u64(text_addr);
	info.u64(image.code.size());

	const std::vector<uint64_t> inline_file = inline_files(image, files);
	// The file of each open caller, innermost last: the function's first.
	std::vector<uint64_t> caller_files{1};
	for (size_t i = 0; i < image.inlines.size(); i++) {
		const CodeImage::Inline &in = image.inlines[i];

		// Close the calls this one is not inside.
		while (caller_files.size() > in.depth) {
			info.u8(0);
			caller_files.pop_back();
		}
		info.uleb(kInlinedCall);
		info.u32(origin[in.name]);
		info.u64(text_addr + in.start);
		info.u64(in.end - in.start);
		info.uleb(caller_files.back());
		info.uleb(in.call_line);
		caller_files.push_back(inline_file[i]);
	}
	while (caller_files.size() > 1) {
		info.u8(0);
		caller_files.pop_back();
	}
	info.u8(0); // the function's children
	info.u8(0); // the unit's
}

} // namespace

void append_line_info(DwarfSections &out, const CodeImage &image, uint64_t text_addr)
{
	const auto info_at = static_cast<uint32_t>(out.info.size());
	const auto line_at = static_cast<uint32_t>(out.line.size());
	if (out.abbrev.empty())
		out.abbrev = abbrev_table();

	FileTable files;
	files.add(image.source_file);
	const bool inlining = !image.inlines.empty();

	Writer info;
	info.u32(0); // unit_length, patched
	info.u16(4);
	info.u32(0); // .debug_abbrev offset
	info.u8(8);
	info.uleb(inlining ? kUnitParent : kUnit);
	info.str("libperfjit");
	info.u16(DW_LANG_Mips_Assembler);
	info.str(image.source_file);
	info.u32(line_at); // .debug_line offset
	info.u64(text_addr);
	info.u64(image.code.size());
	if (inlining)
		append_inlining(info, 0, image, text_addr, files);
	info.patch32(0, info.size() - 4);
	out.info.insert(out.info.end(), info.bytes.begin(), info.bytes.end());

	// Each row's file, before the header that lists them is written.
	const std::vector<uint64_t> inline_file = inline_files(image, files);
	std::vector<uint64_t> row_files;
	for (const auto &row : image.lines)
		row_files.push_back(file_at(image, inline_file, row.offset));

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
	for (const auto &dir : files.dirs)
		line.str(dir);
	line.u8(0);
	for (const auto &[base, dir] : files.files) {
		line.str(base);
		line.uleb(dir);
		line.uleb(0); // mtime
		line.uleb(0); // length
	}
	line.u8(0);
	line.patch32(6, line.size() - header_start);

	line.u8(0);
	line.uleb(9);
	line.u8(DW_LNE_set_address);
	line.u64(text_addr);
	uint64_t addr = 0, cur_file = 1;
	int64_t cur_line = 1;
	for (size_t i = 0; i < image.lines.size(); i++) {
		const perfjit_line &row = image.lines[i];

		if (row.offset > addr) {
			line.u8(DW_LNS_advance_pc);
			line.uleb(row.offset - addr);
			addr = row.offset;
		}
		if (row_files[i] != cur_file) {
			line.u8(DW_LNS_set_file);
			line.uleb(row_files[i]);
			cur_file = row_files[i];
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
