// SPDX-License-Identifier: LGPL-2.1-or-later
// Side files, read back with libelf and libdw.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <memory>
#include <signal.h>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "side_file.hpp"
#include "test_util.hpp"

using namespace perfjit;

namespace
{

const uint8_t kCode[] = {0x55, 0x48, 0x89, 0xe5, 0xb8, 0x2a, 0x00, 0x00, 0x00, 0x5d, 0xc3};

CodeImage make_image(const char *name = "jit_fn", uint32_t generation = 0,
		     const std::vector<uint8_t> &code = {std::begin(kCode), std::end(kCode)})
{
	CodeImage image;

	image.name = name;
	image.generation = generation;
	image.code = code;
	return image;
}

struct ElfFile {
	UniqueFd fd;
	Elf *elf = nullptr;

	explicit ElfFile(const std::string &path) : fd(open(path.c_str(), O_RDONLY | O_CLOEXEC))
	{
		elf_version(EV_CURRENT);
		if (fd)
			elf = elf_begin(fd.get(), ELF_C_READ, nullptr);
	}
	~ElfFile() { elf_end(elf); }

	Elf_Scn *section(const char *name, GElf_Shdr &shdr) const
	{
		size_t shstrndx;

		if (elf_getshdrstrndx(elf, &shstrndx))
			return nullptr;
		for (Elf_Scn *scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
			if (gelf_getshdr(scn, &shdr) &&
			    !strcmp(elf_strptr(elf, shstrndx, shdr.sh_name), name))
				return scn;
		}
		return nullptr;
	}
};

std::vector<std::string> list_dir(const std::string &dir)
{
	std::vector<std::string> names;
	std::unique_ptr<DIR, int (*)(DIR *)> d(opendir(dir.c_str()), closedir);

	for (dirent *e = d ? readdir(d.get()) : nullptr; e; e = readdir(d.get())) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			names.push_back(e->d_name);
	}
	return names;
}

} // namespace

TEST(BuildId, DiffersForNameCodeAndGeneration)
{
	const BuildId base = build_id_of(make_image());

	EXPECT_EQ(base, build_id_of(make_image()));
	EXPECT_NE(base, build_id_of(make_image("jit_other")));
	EXPECT_NE(base, build_id_of(make_image("jit_fn", 1)));
	EXPECT_NE(base, build_id_of(make_image("jit_fn", 0, {0x90, 0xc3})));

	CodeImage with_lines = make_image();
	with_lines.source_file = "/src/prog.calc";
	with_lines.lines = {{0, 3, 1}};
	EXPECT_NE(base, build_id_of(with_lines));
	EXPECT_EQ(build_id_hex(base).size(), 40u);
}

TEST(SideFile, ValidElfWithCodeSymbolAndNote)
{
	TempDir dir;
	CodeImage image = make_image();
	const BuildId id = build_id_of(image);

	ASSERT_EQ(store_side_file(dir.path(), image, id), 0);
	const std::string path = side_file_path(dir.path(), id);
	const std::string hex = build_id_hex(id);
	EXPECT_EQ(path, dir.path() + "/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2));

	ElfFile f(path);
	ASSERT_TRUE(f.elf) << elf_errmsg(-1);
	ASSERT_EQ(elf_kind(f.elf), ELF_K_ELF);

	// The code at file offset == address == kTextOffset (the region's pgoff).
	GElf_Shdr text;
	ASSERT_TRUE(f.section(".text", text));
	EXPECT_EQ(text.sh_offset, kTextOffset);
	EXPECT_EQ(text.sh_addr, kTextOffset);
	EXPECT_EQ(text.sh_size, sizeof(kCode));
	std::vector<uint8_t> bytes(sizeof(kCode));
	ASSERT_EQ(pread(f.fd.get(), bytes.data(), bytes.size(), kTextOffset),
		  (ssize_t)sizeof(kCode));
	EXPECT_EQ(0, memcmp(bytes.data(), kCode, sizeof(kCode)));

	// The symbol covers the code.
	GElf_Shdr symtab;
	Elf_Scn *scn = f.section(".symtab", symtab);
	ASSERT_TRUE(scn);
	Elf_Data *data = elf_getdata(scn, nullptr);
	GElf_Sym sym;
	ASSERT_TRUE(gelf_getsym(data, 1, &sym));
	EXPECT_STREQ(elf_strptr(f.elf, symtab.sh_link, sym.st_name), "jit_fn");
	EXPECT_EQ(sym.st_value, kTextOffset);
	EXPECT_EQ(sym.st_size, sizeof(kCode));
	EXPECT_EQ(GELF_ST_TYPE(sym.st_info), STT_FUNC);

	// The build-id note, as libelf reads it.
	const void *note_id = nullptr;
	ssize_t n = dwelf_elf_gnu_build_id(f.elf, &note_id);
	ASSERT_EQ(n, 20);
	EXPECT_EQ(0, memcmp(note_id, id.data(), 20));

	// binutils and elfutils accept it.
	EXPECT_EQ(0, run_quiet("readelf -W -a " + path));
	if (has_program("eu-readelf")) {
		EXPECT_EQ(0, run_quiet("eu-readelf -a " + path));
	}
}

TEST(SideFile, LineTableReadByLibdw)
{
	TempDir dir;
	CodeImage image = make_image();
	image.source_file = "/src/demo/prog.calc";
	image.lines = {{0, 3, 1}, {4, 5, 9}, {9, 7, 0}};
	const BuildId id = build_id_of(image);

	ASSERT_EQ(store_side_file(dir.path(), image, id), 0);
	UniqueFd fd(open(side_file_path(dir.path(), id).c_str(), O_RDONLY | O_CLOEXEC));
	ASSERT_TRUE(fd);
	std::unique_ptr<Dwarf, int (*)(Dwarf *)> dw(dwarf_begin(fd.get(), DWARF_C_READ), dwarf_end);
	ASSERT_TRUE(dw) << dwarf_errmsg(-1);

	Dwarf_Die cu;
	ASSERT_TRUE(dwarf_addrdie(dw.get(), kTextOffset + 5, &cu)) << dwarf_errmsg(-1);
	for (auto [off, line] : {std::pair<uint64_t, int>{0, 3}, {5, 5}, {10, 7}}) {
		Dwarf_Line *l = dwarf_getsrc_die(&cu, kTextOffset + off);
		int lineno = 0;

		ASSERT_TRUE(l) << "offset " << off;
		ASSERT_EQ(dwarf_lineno(l, &lineno), 0);
		EXPECT_EQ(lineno, line) << "offset " << off;
		EXPECT_STREQ(dwarf_linesrc(l, nullptr, nullptr), "/src/demo/prog.calc");
	}
	if (has_program("addr2line")) {
		EXPECT_EQ(run_output("addr2line -e " + side_file_path(dir.path(), id) + " 0x84"),
			  "/src/demo/prog.calc:5\n");
	}
}

TEST(SideFile, EhFrameSectionAfterTheCode)
{
	TempDir dir;
	CodeImage image = make_image();
	image.eh_frame = {0x14, 0,    0,    0, 0,    0,	   0, 0, 1,    'z', 'R', 0,
			  1,	0x78, 0x10, 1, 0x1b, 0x0c, 7, 8, 0x90, 1,   0,	 0};
	const BuildId id = build_id_of(image);

	ASSERT_EQ(store_side_file(dir.path(), image, id), 0);
	ElfFile f(side_file_path(dir.path(), id));
	GElf_Shdr eh;
	ASSERT_TRUE(f.section(".eh_frame", eh));
	EXPECT_EQ(eh.sh_addr, (kTextOffset + sizeof(kCode) + 7) & ~7ULL);
	EXPECT_EQ(eh.sh_offset, eh.sh_addr);
	EXPECT_EQ(eh.sh_size, image.eh_frame.size());
}

// A CIE ("zR", pc-relative sdata4 addresses) and one FDE covering @code_len
// bytes, laid out as a runtime hands them over: for code at kTextOffset and
// the table at the first 8-byte aligned address after it.
std::vector<uint8_t> make_eh_frame(size_t code_len, const char *augmentation = "zR")
{
	// length 20, CIE id 0, version 1, the augmentation, code alignment 1,
	// data alignment -8, return address r16, augmentation data (the
	// encoding: pcrel sdata4), then CFA = rsp + 8, r16 at CFA - 8.
	std::string cie("\x14\0\0\0\0\0\0\0\x01", 9);

	cie += augmentation;
	cie += std::string("\0\x01\x78\x10\x01\x1b\x0c\x07\x08\x90\x01", 11);
	cie.resize(24, '\0');
	std::vector<uint8_t> eh(cie.begin(), cie.end());

	const int64_t eh_addr = (kTextOffset + code_len + 7) & ~7ULL;
	const int32_t pc_begin = static_cast<int32_t>(kTextOffset - (eh_addr + 24 + 8));
	const uint32_t fde[] = {16, 28, static_cast<uint32_t>(pc_begin),
				static_cast<uint32_t>(code_len), 0};
	const auto *b = reinterpret_cast<const uint8_t *>(fde);
	eh.insert(eh.end(), b, b + sizeof(fde)); // the last word: aug length 0, nops
	eh.insert(eh.end(), {0, 0, 0, 0});	 // terminator
	return eh;
}

// The range of the FDE that covers @addr, as libdw's CFI reader sees it.
std::pair<Dwarf_Addr, Dwarf_Addr> fde_range(Elf *elf, Dwarf_Addr addr)
{
	Dwarf_CFI *cfi = dwarf_getcfi_elf(elf);
	Dwarf_Frame *frame = nullptr;
	Dwarf_Addr start = 0, end = 0;

	if (cfi && dwarf_cfi_addrframe(cfi, addr, &frame) == 0) {
		dwarf_frame_info(frame, &start, &end, nullptr);
		free(frame);
	}
	if (cfi)
		dwarf_cfi_end(cfi);
	return {start, end};
}

TEST(SideFile, EhFrameFdeCoversTheCode)
{
	TempDir dir;
	CodeImage image = make_image();
	image.eh_frame = make_eh_frame(sizeof(kCode));
	const BuildId id = build_id_of(image);

	ASSERT_EQ(store_side_file(dir.path(), image, id), 0);
	ElfFile f(side_file_path(dir.path(), id));
	EXPECT_EQ(fde_range(f.elf, kTextOffset + 3),
		  std::make_pair(Dwarf_Addr{kTextOffset}, Dwarf_Addr{kTextOffset + sizeof(kCode)}));
}

TEST(Pack, EveryFunctionAtItsOffsetWithItsSymbolLinesAndUnwindTable)
{
	TempDir dir;
	Pack pack = {make_image("jit_a"), make_image("jit_b", 0, {0x90, 0x90, 0xc3}),
		     make_image("jit_c")};
	pack[0].source_file = pack[2].source_file = "/src/prog.calc";
	pack[0].lines = {{0, 3, 1}, {4, 4, 1}};
	pack[2].lines = {{0, 10, 1}, {5, 12, 1}};
	for (auto &image : pack)
		image.eh_frame = make_eh_frame(image.code.size());
	const BuildId id = build_id_of(pack);
	const std::vector<uint64_t> offsets = pack_layout(pack);

	ASSERT_EQ(offsets,
		  (std::vector<uint64_t>{kTextOffset, kTextOffset + 16, kTextOffset + 32}));
	ASSERT_EQ(store_side_file(dir.path(), pack, id), 0);
	const std::string path = side_file_path(dir.path(), id);
	ElfFile f(path);
	ASSERT_TRUE(f.elf) << elf_errmsg(-1);

	GElf_Shdr symtab;
	Elf_Scn *scn = f.section(".symtab", symtab);
	ASSERT_TRUE(scn);
	Elf_Data *data = elf_getdata(scn, nullptr);
	ASSERT_EQ(symtab.sh_size / sizeof(Elf64_Sym), pack.size() + 1);
	for (size_t i = 0; i < pack.size(); i++) {
		GElf_Sym sym;
		std::vector<uint8_t> bytes(pack[i].code.size());

		ASSERT_TRUE(gelf_getsym(data, i + 1, &sym));
		EXPECT_EQ(elf_strptr(f.elf, symtab.sh_link, sym.st_name), pack[i].name);
		EXPECT_EQ(sym.st_value, offsets[i]);
		EXPECT_EQ(sym.st_size, pack[i].code.size());
		// File offset == address: the region's pgoff reaches the code.
		ASSERT_EQ(pread(f.fd.get(), bytes.data(), bytes.size(), offsets[i]),
			  static_cast<ssize_t>(bytes.size()));
		EXPECT_EQ(bytes, pack[i].code) << pack[i].name;
		EXPECT_EQ(fde_range(f.elf, offsets[i] + 1),
			  std::make_pair(Dwarf_Addr{offsets[i]},
					 Dwarf_Addr{offsets[i] + pack[i].code.size()}))
			<< pack[i].name;
	}

	// Each function with a line table has its own unit.
	std::unique_ptr<Dwarf, int (*)(Dwarf *)> dw(dwarf_begin(f.fd.get(), DWARF_C_READ),
						    dwarf_end);
	ASSERT_TRUE(dw) << dwarf_errmsg(-1);
	for (auto [addr, line] : {std::pair<uint64_t, int>{offsets[0] + 1, 3},
				  {offsets[0] + 6, 4},
				  {offsets[2] + 2, 10},
				  {offsets[2] + 7, 12}}) {
		Dwarf_Die cu;
		int lineno = 0;

		ASSERT_TRUE(dwarf_addrdie(dw.get(), addr, &cu)) << "address " << addr;
		Dwarf_Line *l = dwarf_getsrc_die(&cu, addr);
		ASSERT_TRUE(l) << "address " << addr;
		ASSERT_EQ(dwarf_lineno(l, &lineno), 0);
		EXPECT_EQ(lineno, line) << "address " << addr;
	}
	Dwarf_Die cu;
	EXPECT_FALSE(dwarf_addrdie(dw.get(), offsets[1] + 1, &cu)) << "jit_b has no line table";

	EXPECT_EQ(0, run_quiet("readelf -W -a " + path));
	if (has_program("eu-readelf")) {
		EXPECT_EQ(0, run_quiet("eu-readelf -a " + path));
	}
}

// The .eh_frame_hdr's search table, as (initial location, FDE address).
std::vector<std::pair<uint64_t, uint64_t>> eh_frame_hdr_table(const ElfFile &f, GElf_Shdr &hdr)
{
	std::vector<std::pair<uint64_t, uint64_t>> rows;
	Elf_Scn *scn = f.section(".eh_frame_hdr", hdr);
	Elf_Data *d = scn ? elf_getdata(scn, nullptr) : nullptr;

	if (!d || d->d_size < 12)
		return rows;
	const auto *b = static_cast<const uint8_t *>(d->d_buf);
	// Version 1; eh_frame_ptr pcrel sdata4; count udata4; table datarel sdata4.
	if (b[0] != 1 || b[1] != 0x1b || b[2] != 0x03 || b[3] != 0x3b)
		return rows;
	uint32_t count;
	memcpy(&count, b + 8, 4);
	if (d->d_size != 12 + 8 * size_t{count})
		return rows;
	for (uint32_t i = 0; i < count; i++) {
		int32_t loc, fde;
		memcpy(&loc, b + 12 + 8 * i, 4);
		memcpy(&fde, b + 16 + 8 * i, 4);
		rows.emplace_back(hdr.sh_addr + loc, hdr.sh_addr + fde);
	}
	return rows;
}

TEST(Pack, GenerationsNoteGivesEachFunctionItsGeneration)
{
	TempDir dir;
	Pack pack = {make_image("jit_a", 3), make_image("jit_b", 0, {0x90, 0x90, 0xc3}),
		     make_image("jit_c", 70000)};
	const BuildId id = build_id_of(pack);
	const std::vector<uint64_t> offsets = pack_layout(pack);

	ASSERT_EQ(store_side_file(dir.path(), pack, id), 0);
	ElfFile f(side_file_path(dir.path(), id));
	ASSERT_TRUE(f.elf) << elf_errmsg(-1);

	// Not loaded (no SHF_ALLOC): it costs nothing at run time.
	GElf_Shdr shdr;
	Elf_Scn *scn = f.section(".note.perfjit", shdr);
	ASSERT_TRUE(scn);
	EXPECT_EQ(shdr.sh_type, static_cast<GElf_Word>(SHT_NOTE));
	EXPECT_EQ(shdr.sh_flags & SHF_ALLOC, 0u);

	// As libelf (and perf) read notes.
	Elf_Data *data = elf_getdata(scn, nullptr);
	ASSERT_TRUE(data);
	GElf_Nhdr nhdr;
	size_t name_off, desc_off;
	ASSERT_GT(gelf_getnote(data, 0, &nhdr, &name_off, &desc_off), 0u);
	EXPECT_STREQ(static_cast<const char *>(data->d_buf) + name_off, "perfjit");
	EXPECT_EQ(nhdr.n_type, kGenerationsNoteType);
	ASSERT_EQ(nhdr.n_descsz, pack.size() * 16);
	const auto *desc = static_cast<const uint8_t *>(data->d_buf) + desc_off;
	for (size_t i = 0; i < pack.size(); i++) {
		uint64_t addr;
		uint32_t gen, zero;

		memcpy(&addr, desc + i * 16, 8);
		memcpy(&gen, desc + i * 16 + 8, 4);
		memcpy(&zero, desc + i * 16 + 12, 4);
		EXPECT_EQ(addr, offsets[i]) << pack[i].name;
		EXPECT_EQ(gen, pack[i].generation) << pack[i].name;
		EXPECT_EQ(zero, 0u) << pack[i].name;
	}
	EXPECT_EQ(0, run_quiet("readelf -W -n " + side_file_path(dir.path(), id)));
}

TEST(Pack, EhFrameHdrIndexesEveryFunction)
{
	TempDir dir;
	Pack pack = {make_image("jit_a"), make_image("jit_b", 0, {0x90, 0x90, 0xc3}),
		     make_image("jit_c")};
	for (auto &image : pack)
		image.eh_frame = make_eh_frame(image.code.size());
	const BuildId id = build_id_of(pack);
	const std::vector<uint64_t> offsets = pack_layout(pack);

	ASSERT_EQ(store_side_file(dir.path(), pack, id), 0);
	ElfFile f(side_file_path(dir.path(), id));
	ASSERT_TRUE(f.elf) << elf_errmsg(-1);
	GElf_Shdr eh, hdr;
	ASSERT_TRUE(f.section(".eh_frame", eh));
	const auto rows = eh_frame_hdr_table(f, hdr);
	ASSERT_EQ(rows.size(), pack.size());
	EXPECT_EQ(hdr.sh_offset, hdr.sh_addr);
	EXPECT_GE(hdr.sh_addr, eh.sh_addr + eh.sh_size);
	for (size_t i = 0; i < pack.size(); i++) {
		// Sorted by address; each row points at an FDE in .eh_frame
		// whose pc-relative begin is the function's offset.
		EXPECT_EQ(rows[i].first, offsets[i]) << pack[i].name;
		ASSERT_GE(rows[i].second, eh.sh_addr);
		ASSERT_LT(rows[i].second + 12, eh.sh_addr + eh.sh_size);
		int32_t pc_begin;
		ASSERT_EQ(pread(f.fd.get(), &pc_begin, 4, rows[i].second + 8), 4);
		EXPECT_EQ(rows[i].second + 8 + pc_begin, offsets[i]) << pack[i].name;
	}

	// The segment that points at it, within the loaded one.
	size_t nr;
	ASSERT_EQ(elf_getphdrnum(f.elf, &nr), 0);
	ASSERT_EQ(nr, 2u);
	GElf_Phdr load, eh_seg;
	ASSERT_TRUE(gelf_getphdr(f.elf, 0, &load));
	ASSERT_TRUE(gelf_getphdr(f.elf, 1, &eh_seg));
	EXPECT_EQ(load.p_type, PT_LOAD);
	EXPECT_EQ(eh_seg.p_type, static_cast<Elf64_Word>(PT_GNU_EH_FRAME));
	EXPECT_EQ(eh_seg.p_vaddr, hdr.sh_addr);
	EXPECT_EQ(eh_seg.p_filesz, hdr.sh_size);
	EXPECT_GE(load.p_vaddr + load.p_filesz, hdr.sh_addr + hdr.sh_size);
	EXPECT_EQ(0, run_quiet("readelf -W -a " + side_file_path(dir.path(), id)));
}

TEST(SideFile, EhFrameHdrOnlyWithAnUnwindTable)
{
	TempDir dir;
	CodeImage image = make_image();
	const BuildId plain = build_id_of(image);

	ASSERT_EQ(store_side_file(dir.path(), image, plain), 0);
	GElf_Shdr hdr;
	size_t nr;
	{
		ElfFile f(side_file_path(dir.path(), plain));
		EXPECT_FALSE(f.section(".eh_frame_hdr", hdr));
		ASSERT_EQ(elf_getphdrnum(f.elf, &nr), 0);
		EXPECT_EQ(nr, 1u);
	}

	image.eh_frame = make_eh_frame(sizeof(kCode));
	const BuildId with = build_id_of(image);
	ASSERT_EQ(store_side_file(dir.path(), image, with), 0);
	ElfFile f(side_file_path(dir.path(), with));
	const auto rows = eh_frame_hdr_table(f, hdr);
	ASSERT_EQ(rows.size(), 1u);
	EXPECT_EQ(rows[0].first, kTextOffset);
}

// A table the library cannot index is stored as given, without a header.
TEST(SideFile, NoEhFrameHdrForATableThatCannotBeRead)
{
	TempDir dir;
	CodeImage image = make_image();
	image.eh_frame = make_eh_frame(sizeof(kCode));
	image.eh_frame.resize(30); // the FDE cut short
	const BuildId id = build_id_of(image);

	ASSERT_EQ(store_side_file(dir.path(), image, id), 0);
	ElfFile f(side_file_path(dir.path(), id));
	GElf_Shdr shdr;
	size_t nr;
	EXPECT_TRUE(f.section(".eh_frame", shdr));
	EXPECT_FALSE(f.section(".eh_frame_hdr", shdr));
	ASSERT_EQ(elf_getphdrnum(f.elf, &nr), 0);
	EXPECT_EQ(nr, 1u);
}

TEST(Pack, AdjacentCodeKeepsItsDistances)
{
	Pack pack = {make_image("jit_a"), make_image("jit_b"), make_image("jit_c"),
		     make_image("jit_d")};
	pack[0].addr = 0x1000;
	pack[1].addr = 0x1020; // 21 bytes after jit_a's end: adjacent
	pack[2].addr = 0x2000; // far away
	pack[3].addr = 0x2000 + sizeof(kCode) + kAdjacentGap; // just too far

	EXPECT_TRUE(adjacent(pack[0], pack[1]));
	EXPECT_FALSE(adjacent(pack[1], pack[2]));
	EXPECT_FALSE(adjacent(pack[2], pack[3]));
	EXPECT_FALSE(adjacent(pack[1], pack[0])); // not in address order
	EXPECT_EQ(pack_layout(pack),
		  (std::vector<uint64_t>{kTextOffset, kTextOffset + 0x20, kTextOffset + 0x30,
					 kTextOffset + 0x40}));
	// The layout is part of the file: another layout, another build-id.
	Pack moved = pack;
	moved[1].addr = 0x1030;
	EXPECT_NE(build_id_of(pack), build_id_of(moved));
	// A function's own file does not depend on where the code was.
	EXPECT_EQ(build_id_of(pack[0]), build_id_of(make_image("jit_a")));
}

TEST(Pack, BuildIdNamesTheWholePack)
{
	const Pack ab = {make_image("jit_a"), make_image("jit_b")};
	const Pack ba = {make_image("jit_b"), make_image("jit_a")};
	const Pack ab1 = {make_image("jit_a"), make_image("jit_b", 1)};

	EXPECT_EQ(build_id_of(Pack{make_image("jit_a")}), build_id_of(make_image("jit_a")));
	EXPECT_NE(build_id_of(ab), build_id_of(ab[0]));
	EXPECT_NE(build_id_of(ab), build_id_of(ab[1]));
	EXPECT_NE(build_id_of(ab), build_id_of(ba)); // other offsets, other file
	EXPECT_NE(build_id_of(ab), build_id_of(ab1));
}

TEST(Pack, UnwindTablesThatCannotMove)
{
	CodeImage image = make_image();

	EXPECT_TRUE(eh_frame_relocatable(image));
	image.eh_frame = make_eh_frame(sizeof(kCode));
	EXPECT_TRUE(eh_frame_relocatable(image));
	// A personality routine: its pointer is not ours to move.
	image.eh_frame = make_eh_frame(sizeof(kCode), "zPR");
	EXPECT_FALSE(eh_frame_relocatable(image));
	// Truncated.
	image.eh_frame = make_eh_frame(sizeof(kCode));
	image.eh_frame.resize(30);
	EXPECT_FALSE(eh_frame_relocatable(image));
	// Storing a pack with such a table is an error, never a wrong table.
	TempDir dir;
	Pack pack = {make_image("jit_a"), image};
	EXPECT_EQ(store_side_file(dir.path(), pack, build_id_of(pack)), -EINVAL);
	EXPECT_TRUE(list_dir(dir.path() + "/.build-id").size() <= 1);
}

TEST(SideFile, ExistingFileIsNotRewritten)
{
	TempDir dir;
	CodeImage image = make_image();
	const BuildId id = build_id_of(image);
	struct stat before, after;

	ASSERT_EQ(store_side_file(dir.path(), image, id), 0);
	const std::string path = side_file_path(dir.path(), id);
	ASSERT_EQ(stat(path.c_str(), &before), 0);
	const auto bytes = read_file(path);
	// Another image under the same build-id would be written differently.
	CodeImage other = make_image("jit_other");
	ASSERT_EQ(store_side_file(dir.path(), other, id), 0);
	ASSERT_EQ(stat(path.c_str(), &after), 0);
	EXPECT_EQ(before.st_ino, after.st_ino);
	EXPECT_EQ(read_file(path), bytes);
}

// A file at the path that is not the side file, whole (a crash tore it
// before an older writer synced it, or it is another build-id's), is
// replaced; side_file_intact() tells them apart.
TEST(SideFile, TornFileIsReplaced)
{
	TempDir dir;
	CodeImage image = make_image();
	const BuildId id = build_id_of(image);
	const std::string path = side_file_path(dir.path(), id);
	std::vector<uint8_t> whole, other;

	ASSERT_EQ(make_elf(image, id, whole), 0);
	CodeImage another = make_image("jit_other");
	ASSERT_EQ(make_elf(another, build_id_of(another), other), 0);
	ASSERT_EQ(mkdir_p(path.substr(0, path.rfind('/'))), 0);
	const std::vector<std::vector<uint8_t>> bad = {
		{},
		{whole.begin(), whole.begin() + whole.size() / 2},
		other,
		std::vector<uint8_t>(whole.size(), 0)};
	for (const auto &bytes : bad) {
		{
			std::ofstream out(path, std::ios::binary | std::ios::trunc);
			out.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
		}
		EXPECT_FALSE(side_file_intact(path, id)) << bytes.size() << " bytes";
		ASSERT_EQ(store_side_file(dir.path(), image, id), 0);
		EXPECT_TRUE(side_file_intact(path, id));
		EXPECT_EQ(read_file(path), whole) << "after " << bytes.size() << " bytes";
	}
}

// Another user's side file that this one cannot read (mode 0600 in a
// shared directory) is taken as it is: neither checked nor rewritten, and
// no error, as when it could be read.
TEST(SideFile, AnotherUsersUnreadableFileIsTakenAsItIs)
{
	if (geteuid() != 0)
		GTEST_SKIP() << "needs root, to be the other user";
	TempDir dir;
	const CodeImage image = make_image();
	const BuildId id = build_id_of(image);
	const std::string path = side_file_path(dir.path(), id);
	const CodeImage missing = make_image("jit_missing");

	ASSERT_EQ(store_side_file(dir.path(), image, id), 0);
	ASSERT_EQ(
		std::system(
			("chmod -R a+rwX '" + dir.path() + "'; chmod 0600 '" + path + "'").c_str()),
		0);
	const pid_t child = fork();
	ASSERT_GE(child, 0);
	if (child == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(2);
		// 2: the child cannot be another user here (a user namespace).
		const bool taken = refresh_side_file(dir.path(), id) == 0 &&
				   store_side_file(dir.path(), image, id) == 0;
		const bool absent = refresh_side_file(dir.path(), build_id_of(missing)) == -ENOENT;
		_exit(taken && absent ? 0 : 1);
	}
	int status = 0;
	ASSERT_EQ(waitpid(child, &status, 0), child);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
		GTEST_SKIP() << "setuid(65534) failed: no other user to be here";
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
	struct stat st;
	ASSERT_EQ(stat(path.c_str(), &st), 0);
	EXPECT_EQ(st.st_uid, 0u) << "rewritten by the other user";
}

TEST(SideFile, ConcurrentWritersLeaveOneIntactFile)
{
	TempDir dir;
	CodeImage image = make_image();
	const BuildId id = build_id_of(image);
	std::vector<std::thread> threads;
	std::vector<int> results(8, -1);

	for (size_t i = 0; i < results.size(); i++)
		threads.emplace_back(
			[&, i] { results[i] = store_side_file(dir.path(), image, id); });
	for (auto &t : threads)
		t.join();
	for (int r : results)
		EXPECT_EQ(r, 0);

	std::vector<uint8_t> expected;
	ASSERT_EQ(make_elf(image, id, expected), 0);
	EXPECT_EQ(read_file(side_file_path(dir.path(), id)), expected);
	const std::string hex = build_id_hex(id);
	EXPECT_EQ(list_dir(dir.path() + "/.build-id/" + hex.substr(0, 2)),
		  std::vector<std::string>{hex.substr(2)}); // no temporary left
}

TEST(SideFile, FullDiskLeavesNoPartialFile)
{
	TempDir dir;
	std::vector<uint8_t> big(256 * 1024, 0x90);
	CodeImage image = make_image("jit_big", 0, big);
	const BuildId id = build_id_of(image);
	struct rlimit old;

	// A file size limit is a full disk that needs no privileges.
	signal(SIGXFSZ, SIG_IGN);
	ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
	// The soft limit only: a lowered hard limit cannot be raised again.
	struct rlimit small = {64 * 1024, old.rlim_max};
	ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
	const int err = store_side_file(dir.path(), image, id);
	setrlimit(RLIMIT_FSIZE, &old);

	EXPECT_LT(err, 0);
	EXPECT_NE(access(side_file_path(dir.path(), id).c_str(), F_OK), 0);
	const std::string hex = build_id_hex(id);
	EXPECT_TRUE(list_dir(dir.path() + "/.build-id/" + hex.substr(0, 2)).empty());
}

TEST(SideFile, UnwritableStoreIsAnError)
{
	CodeImage image = make_image();

	// A store below a regular file cannot be created, even by root.
	EXPECT_EQ(store_side_file("/dev/null/store", image, build_id_of(image)), -ENOTDIR);
	// What failed, and where.
	std::string why;
	EXPECT_EQ(store_side_file("/dev/null/store", Pack{image}, build_id_of(image), nullptr,
				  nullptr, &why),
		  -ENOTDIR);
	EXPECT_EQ(why.rfind("mkdir /dev/null/store/.build-id/", 0), 0u) << why;
	EXPECT_NE(why.find(strerror(ENOTDIR)), std::string::npos) << why;
}

// The lines of /proc/self/maps that map @path.
static size_t mappings_of(const std::string &path)
{
	std::unique_ptr<FILE, int (*)(FILE *)> maps(fopen("/proc/self/maps", "r"), fclose);
	char line[4096];
	size_t n = 0;

	while (maps && fgets(line, sizeof(line), maps.get())) {
		std::string s(line);

		if (s.size() > path.size() + 1 &&
		    s.compare(s.size() - path.size() - 1, path.size(), path) == 0)
			n++;
	}
	return n;
}

TEST(DirMarker, MappedOnceWhereTheSideFilesAre)
{
	TempDir dir;
	const std::string path = dir.path() + "/.build-id/.code-regions";
	{
		DirMarker marker;

		ASSERT_EQ(marker.map(dir.path()), 0);
		ASSERT_EQ(marker.map(dir.path()), 0);
		EXPECT_EQ(mappings_of(path), 1u);
		const std::vector<uint8_t> text = read_file(path);
		EXPECT_GT(text.size(), 0u);
		// No temporary left, and a second process's marker is the same file.
		EXPECT_EQ(list_dir(dir.path() + "/.build-id"),
			  std::vector<std::string>{".code-regions"});
		struct stat before, after;
		ASSERT_EQ(stat(path.c_str(), &before), 0);
		DirMarker other;
		ASSERT_EQ(other.map(dir.path()), 0);
		ASSERT_EQ(stat(path.c_str(), &after), 0);
		EXPECT_EQ(before.st_ino, after.st_ino);
		EXPECT_EQ(mappings_of(path), 2u);
	}
	EXPECT_EQ(mappings_of(path), 0u);
	// A directory that cannot be created is an error, and maps nothing.
	DirMarker marker;
	EXPECT_EQ(marker.map("/dev/null/store"), -ENOTDIR);
}

// The size of the regular files under @dir/.build-id/xx/.
static uint64_t side_file_bytes(const std::string &dir)
{
	return std::stoull(run_output("find '" + dir +
				      "/.build-id' -mindepth 2 -type f -printf '%s\\n' | "
				      "awk '{ n += $1 } END { print n + 0 }'"));
}

static void set_mtime(const std::string &path, time_t when)
{
	const timespec times[2] = {{when, 0}, {when, 0}};

	ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

// A directory past its bound loses its oldest side files first, down to
// 7/8 of the bound, but never one it is told to keep, nor perf's own
// entries (symbolic links) or files not named by a build-id. A refreshed
// file is the newest.
TEST(DirBound, OldestGoFirstButNeverWhatIsKept)
{
	TempDir dir;
	std::vector<BuildId> ids;
	std::vector<std::string> paths;
	uint64_t size = 0;

	for (int i = 0; i < 10; i++) {
		const std::string name = "jit_bound_" + std::to_string(i);
		const CodeImage image = make_image(name.c_str());
		uint64_t written = 0;

		ids.push_back(build_id_of(image));
		ASSERT_EQ(store_side_file(dir.path(), Pack{image}, ids.back(), nullptr, &written),
			  0);
		paths.push_back(side_file_path(dir.path(), ids.back()));
		ASSERT_GT(written, 0u);
		ASSERT_TRUE(!size || written == size) << "the files differ in size";
		size = written;
		// Stored again: nothing written, and the file made the newest.
		set_mtime(paths.back(), 1000);
		ASSERT_EQ(store_side_file(dir.path(), Pack{image}, ids.back(), nullptr, &written),
			  0);
		EXPECT_EQ(written, 0u);
		struct stat st;
		ASSERT_EQ(stat(paths.back().c_str(), &st), 0);
		EXPECT_GT(st.st_mtime, 1000000);
		set_mtime(paths.back(), 1000000 + i);
	}
	// perf's cache entry for an ELF file, and a file no build-id names.
	const std::string link = dir.path() + "/.build-id/00/" + std::string(38, '1');
	ASSERT_EQ(mkdir((dir.path() + "/.build-id/00").c_str(), 0755) == 0 || errno == EEXIST,
		  true);
	ASSERT_EQ(symlink("../../elsewhere/elf", link.c_str()), 0);
	const std::string other = dir.path() + "/.build-id/00/notes.txt";
	ASSERT_EQ(std::system(("head -c 100000 /dev/zero > '" + other + "'").c_str()), 0);
	set_mtime(other, 1);

	// The oldest of them stored again: now the newest.
	const CodeImage first = make_image("jit_bound_1");
	ASSERT_EQ(store_side_file(dir.path(), Pack{first}, ids[1]), 0);

	// A bound of 6 files, of 10: they go down to 6 * 7/8 = 5.25 files.
	// The oldest (0) is kept and 1 is the newest now: 2 to 6 go, in that
	// order.
	DirBound bound(6 * size);
	EXPECT_FALSE(bound.due());
	bound.add(size);
	EXPECT_TRUE(bound.due());
	DirBound::Result r;
	ASSERT_EQ(bound.prune(
			  dir.path(), [&] { return std::vector<BuildId>{ids[0]}; }, &r),
		  0);
	EXPECT_EQ(r.removed, 5u);
	EXPECT_EQ(r.removed_bytes, 5 * size);
	EXPECT_EQ(r.bytes, 5 * size);
	for (int i = 0; i < 10; i++) {
		const bool gone = i >= 2 && i <= 6;

		EXPECT_EQ(access(paths[i].c_str(), F_OK) != 0, gone) << "file " << i;
	}
	EXPECT_EQ(access(other.c_str(), F_OK), 0);
	struct stat st;
	EXPECT_EQ(lstat(link.c_str(), &st), 0);
	EXPECT_EQ(side_file_bytes(dir.path()), 5 * size + 100000);

	// Not due until what is written reaches the bound again.
	EXPECT_FALSE(bound.due());
	bound.add(size);
	EXPECT_FALSE(bound.due());
	bound.add(size);
	EXPECT_TRUE(bound.due());

	// What must be kept may hold the directory above its bound: nothing
	// else goes, and it is measured again only after an eighth of it, or
	// kMinRemeasure for a bound this small.
	DirBound tight(2 * size);
	std::vector<BuildId> all{ids[0], ids[1], ids[7], ids[8], ids[9]};
	std::sort(all.begin(), all.end());
	tight.add(1);
	ASSERT_EQ(tight.prune(
			  dir.path(), [&] { return all; }, &r),
		  0);
	EXPECT_EQ(r.removed, 0u);
	EXPECT_EQ(r.bytes, 5 * size);
	EXPECT_FALSE(tight.due());
	tight.add(DirBound::kMinRemeasure);
	EXPECT_FALSE(tight.due());
	tight.add(1);
	EXPECT_TRUE(tight.due());

	// A file stored again (its time changed) after the directory was read
	// stays: the build-ids to keep are asked for after the reading, and
	// stand for it here.
	const CodeImage again = make_image("jit_bound_7");
	DirBound bound2(size);
	ASSERT_EQ(bound2.prune(
			  dir.path(),
			  [&] {
				  store_side_file(dir.path(), Pack{again}, ids[7]);
				  return std::vector<BuildId>{};
			  },
			  &r),
		  0);
	EXPECT_EQ(access(paths[7].c_str(), F_OK), 0);
	EXPECT_EQ(r.removed, 4u) << "all but the file stored again";

	// A temporary that a killed writer left an hour ago goes; a newer one
	// may be a writer's at work, and stays.
	const std::string old_tmp = dir.path() + "/.build-id/00/.perfjit-1-1";
	const std::string new_tmp = dir.path() + "/.build-id/00/.perfjit-1-2";
	ASSERT_EQ(std::system(("touch '" + old_tmp + "' '" + new_tmp + "'").c_str()), 0);
	set_mtime(old_tmp, time(nullptr) - 7200);
	DirBound any(1 << 20);
	ASSERT_EQ(any.prune(dir.path(), {}, &r), 0);
	EXPECT_NE(access(old_tmp.c_str(), F_OK), 0);
	EXPECT_EQ(access(new_tmp.c_str(), F_OK), 0);

	// No directory yet: nothing to do, and no error.
	DirBound none(size);
	none.add(1);
	EXPECT_EQ(none.prune(dir.path() + "/nothing", {}, &r), 0);
	EXPECT_FALSE(none.due());
}

// The number of session directories under .build-id/.live.
static size_t pin_dirs(const std::string &dir)
{
	std::unique_ptr<DIR, int (*)(DIR *)> d(opendir((dir + "/.build-id/.live").c_str()),
					       closedir);
	size_t n = 0;

	while (d && readdir(d.get()))
		n++;
	return d ? n - 2 : 0;
}

// A pinned side file stays through every bound, and comes back from its pin
// if something removes it anyway; a session that ended without unpinning
// (killed) leaves pins that the next prune removes.
TEST(Pins, KeepLiveFilesFromEveryBound)
{
	TempDir dir;
	std::vector<BuildId> ids;
	std::vector<std::string> paths;
	for (int i = 0; i < 4; i++) {
		const std::string name = "jit_pinned_" + std::to_string(i);
		const CodeImage image = make_image(name.c_str());

		ids.push_back(build_id_of(image));
		ASSERT_EQ(store_side_file(dir.path(), Pack{image}, ids.back()), 0);
		paths.push_back(side_file_path(dir.path(), ids.back()));
		set_mtime(paths.back(), 1000 + i);
	}
	auto pins = std::make_unique<Pins>();
	std::string why;
	ASSERT_EQ(pins->open(dir.path(), &why), 0) << why;
	ASSERT_EQ(pins->pin(ids[0], paths[0]), 0);
	ASSERT_EQ(pins->pin(ids[1], paths[1]), 0);
	// Two live functions of one build-id (the same code at two addresses):
	// one unpin leaves the other's pin.
	ASSERT_EQ(pins->pin(ids[1], paths[1]), 0);
	EXPECT_EQ(pins->pin(ids[3], paths[3] + ".gone"), -ENOENT);

	// A session killed while it held ids[2] pinned.
	const pid_t child = fork();
	ASSERT_GE(child, 0);
	if (child == 0) {
		Pins killed;

		_exit(killed.open(dir.path()) || killed.pin(ids[2], paths[2]) ? 1 : 0);
	}
	int status = 0;
	ASSERT_EQ(waitpid(child, &status, 0), child);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	EXPECT_EQ(pin_dirs(dir.path()), 2u);

	// A bound that keeps nothing: the pinned files stay, the ended
	// session's pins go and its file with them.
	DirBound bound(1);
	bound.add(1);
	DirBound::Result r;
	ASSERT_EQ(bound.prune(dir.path(), {}, &r), 0);
	EXPECT_EQ(r.removed, 2u);
	for (int i = 0; i < 4; i++)
		EXPECT_EQ(access(paths[i].c_str(), F_OK) == 0, i < 2) << "file " << i;
	EXPECT_EQ(pin_dirs(dir.path()), 1u);

	// Removed anyway: back from the pin, whole, with its .build-id/xx
	// directory if that went too.
	ASSERT_EQ(unlink(paths[0].c_str()), 0);
	rmdir(paths[0].substr(0, paths[0].rfind('/')).c_str());
	ASSERT_EQ(pins->restore(ids[0]), 0);
	EXPECT_TRUE(side_file_intact(paths[0], ids[0]));
	EXPECT_EQ(pins->restore(ids[3]), -ENOENT) << "never pinned";

	// Unpinned as often as pinned: the next bound takes it.
	pins->unpin(ids[1]);
	bound.add(1);
	ASSERT_EQ(bound.prune(dir.path(), {}, &r), 0);
	EXPECT_EQ(r.removed, 0u) << "one of two pins left";
	pins->unpin(ids[1]);
	bound.add(1);
	ASSERT_EQ(bound.prune(dir.path(), {}, &r), 0);
	EXPECT_EQ(r.removed, 1u);
	EXPECT_NE(access(paths[1].c_str(), F_OK), 0);
	EXPECT_EQ(access(paths[0].c_str(), F_OK), 0);

	// A session that ends removes its pins.
	pins.reset();
	EXPECT_EQ(pin_dirs(dir.path()), 0u);
	bound.add(1);
	ASSERT_EQ(bound.prune(dir.path(), {}, &r), 0);
	EXPECT_NE(access(paths[0].c_str(), F_OK), 0);
}

TEST(CodeImage, BadArguments)
{
	perfjit_code c{};
	CodeImage image;
	perfjit_line rows[2] = {{4, 1, 0}, {2, 2, 0}};

	c.size = sizeof(c);
	c.name = "f";
	c.addr = kCode;
	c.len = sizeof(kCode);
	EXPECT_EQ(CodeImage::from(c, image), 0);

	perfjit_code bad = c;
	bad.size = 8;
	EXPECT_EQ(CodeImage::from(bad, image), -EINVAL);
	bad = c;
	bad.name = "";
	EXPECT_EQ(CodeImage::from(bad, image), -EINVAL);
	bad = c;
	bad.len = 0;
	EXPECT_EQ(CodeImage::from(bad, image), -EINVAL);
	bad = c;
	bad.lines = rows;
	bad.nr_lines = 2;
	bad.source_file = "x";
	EXPECT_EQ(CodeImage::from(bad, image), -EINVAL); // not sorted
	bad.nr_lines = 1;
	bad.source_file = nullptr;
	EXPECT_EQ(CodeImage::from(bad, image), -EINVAL); // no source file
	rows[0].offset = sizeof(kCode);
	bad.source_file = "x";
	EXPECT_EQ(CodeImage::from(bad, image), -EINVAL); // past the code
}

TEST(CodeImage, SizeVersions)
{
	perfjit_inline in[1] = {{0, 4, "g", "g.src", 3, 1}};
	struct {
		perfjit_code c;
		uint64_t later; // a field of a later version of the header
	} big{};
	CodeImage image;

	big.c.size = PERFJIT_CODE_SIZE_VER0;
	big.c.name = "f";
	big.c.addr = kCode;
	big.c.len = sizeof(kCode);
	big.c.inlines = in; // past the size given: not read
	big.c.nr_inlines = 1;
	ASSERT_EQ(CodeImage::from(big.c, image), 0);
	EXPECT_TRUE(image.inlines.empty());
	// Fields past the size are absent, as libbpf reads its options: a
	// table without its length is none.
	big.c.size = PERFJIT_CODE_SIZE_VER0 + 8;
	ASSERT_EQ(CodeImage::from(big.c, image), 0);
	EXPECT_TRUE(image.inlines.empty());
	big.c.size = PERFJIT_CODE_SIZE_VER0 + 4; // not a field's end
	EXPECT_EQ(CodeImage::from(big.c, image), -EINVAL);
	big.c.size = offsetof(perfjit_code, len); // every version has len
	EXPECT_EQ(CodeImage::from(big.c, image), -EINVAL);
	big.c.size = offsetof(perfjit_code, source_file);
	ASSERT_EQ(CodeImage::from(big.c, image), 0);
	big.c.size = sizeof(big.c);
	ASSERT_EQ(CodeImage::from(big.c, image), 0);
	EXPECT_EQ(image.inlines.size(), 1u);
	// A later header's fields this library does not know must be zero.
	big.c.size = sizeof(big);
	EXPECT_EQ(CodeImage::from(big.c, image), 0);
	big.later = 1;
	EXPECT_EQ(CodeImage::from(big.c, image), -E2BIG);
	big.later = 0;
	big.c.size = 8192;
	EXPECT_EQ(CodeImage::from(big.c, image), -E2BIG);
}

TEST(CodeImage, InliningMustNest)
{
	perfjit_code c{};
	CodeImage image;

	c.size = sizeof(c);
	c.name = "f";
	c.addr = kCode;
	c.len = sizeof(kCode);
	auto check = [&](std::vector<perfjit_inline> in) {
		c.inlines = in.data();
		c.nr_inlines = in.size();
		return CodeImage::from(c, image);
	};
	EXPECT_EQ(check({{0, 4, "g", nullptr, 3, 1},
			 {1, 3, "h", nullptr, 5, 2},
			 {6, 9, "g", "", 4, 1}}),
		  0);
	EXPECT_EQ(check({{0, 4, "g", nullptr, 3, 2}}), -EINVAL); // no caller
	EXPECT_EQ(check({{0, 4, "g", nullptr, 3, 1}, {3, 6, "h", nullptr, 5, 2}}),
		  -EINVAL);					  // outside
	EXPECT_EQ(check({{4, 4, "g", nullptr, 3, 1}}), -EINVAL);  // empty
	EXPECT_EQ(check({{0, 12, "g", nullptr, 3, 1}}), -EINVAL); // past the code
	EXPECT_EQ(check({{6, 8, "g", nullptr, 3, 1}, {0, 4, "g", nullptr, 3, 1}}),
		  -EINVAL);					     // order
	EXPECT_EQ(check({{0, 4, nullptr, nullptr, 3, 1}}), -EINVAL); // no name
	EXPECT_EQ(check({{0, 6, "g", nullptr, 3, 1}, {4, 9, "h", nullptr, 5, 1}}),
		  -EINVAL); // overlap
	EXPECT_EQ(check({{0, 4, "g", nullptr, 3, 1},
			 {1, 3, "h", nullptr, 5, 2},
			 {2, 4, "k", nullptr, 6, 2}}),
		  -EINVAL); // siblings inside a caller overlap
	c.nr_inlines = 1;
	c.inlines = nullptr;
	EXPECT_EQ(CodeImage::from(c, image), -EINVAL);
}

// Inlined calls become DW_TAG_inlined_subroutine entries that libdw and
// addr2line -i (what perf report --inline runs) read back, innermost first,
// with each caller's line; the line table gives the inlined code's lines in
// its own file.
TEST(SideFile, InliningReadByLibdwAndAddr2line)
{
	TempDir dir;
	CodeImage image = make_image("Outer.run()");
	image.source_file = "pkg/Outer.java";
	image.lines = {{0, 10, 0}, {2, 20, 0}, {5, 30, 0}, {8, 11, 0}};
	image.inlines = {{2, 8, "Mid.step()", "pkg/Mid.java", 10, 1},
			 {5, 7, "Leaf.get()", "other/Leaf.java", 21, 2}};
	const BuildId id = build_id_of(image);
	CodeImage plain = image;
	plain.inlines.clear();
	EXPECT_NE(id, build_id_of(plain));

	ASSERT_EQ(store_side_file(dir.path(), image, id), 0);
	const std::string path = side_file_path(dir.path(), id);
	UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
	ASSERT_TRUE(fd);
	std::unique_ptr<Dwarf, int (*)(Dwarf *)> dw(dwarf_begin(fd.get(), DWARF_C_READ), dwarf_end);
	ASSERT_TRUE(dw) << dwarf_errmsg(-1);
	Dwarf_Die cu;
	ASSERT_TRUE(dwarf_addrdie(dw.get(), kTextOffset + 6, &cu)) << dwarf_errmsg(-1);

	// The innermost scope is the inlined call, named by its abstract
	// origin, with the line of the call in its caller.
	Dwarf_Die *scopes = nullptr;
	const int n = dwarf_getscopes(&cu, kTextOffset + 6, &scopes);
	std::unique_ptr<Dwarf_Die, void (*)(void *)> own(scopes, free);
	ASSERT_GT(n, 0) << dwarf_errmsg(-1);
	EXPECT_EQ(dwarf_tag(&scopes[0]), DW_TAG_inlined_subroutine);
	EXPECT_STREQ(dwarf_diename(&scopes[0]), "Leaf.get()");
	Dwarf_Attribute attr;
	Dwarf_Word call_line = 0;
	ASSERT_TRUE(dwarf_attr(&scopes[0], DW_AT_call_line, &attr));
	ASSERT_EQ(dwarf_formudata(&attr, &call_line), 0);
	EXPECT_EQ(call_line, 21u);
	for (auto [off, file, line] :
	     {std::tuple<uint64_t, const char *, int>{0, "pkg/Outer.java", 10},
	      {3, "pkg/Mid.java", 20},
	      {6, "other/Leaf.java", 30},
	      {9, "pkg/Outer.java", 11}}) {
		Dwarf_Line *l = dwarf_getsrc_die(&cu, kTextOffset + off);
		int lineno = 0;

		ASSERT_TRUE(l) << "offset " << off;
		ASSERT_EQ(dwarf_lineno(l, &lineno), 0);
		EXPECT_EQ(lineno, line) << "offset " << off;
		EXPECT_STREQ(dwarf_linesrc(l, nullptr, nullptr), file) << "offset " << off;
	}
	if (has_program("addr2line")) {
		EXPECT_EQ(run_output("addr2line -i -f -e " + path + " 0x86"),
			  "Leaf.get()\nother/Leaf.java:30\nMid.step()\npkg/Mid.java:21\n"
			  "Outer.run()\npkg/Outer.java:10\n");
	}
}
