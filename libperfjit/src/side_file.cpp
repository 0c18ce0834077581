// SPDX-License-Identifier: LGPL-2.1-or-later
#include "side_file.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <dwarf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <map>
#include <memory>
#include <new>
#include <openssl/evp.h>
#include <stdexcept>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "dwarf.hpp"
#include "elf_host.hpp"
#include "util.hpp"

namespace perfjit
{

// The fields of 0.1's perfjit_code, where 0.1's callers put them.
static_assert(sizeof(void *) != 8 || PERFJIT_CODE_SIZE_VER0 == 72,
	      "perfjit_code's first version must not change");

namespace
{

// Copies @c's inlining table: sorted by start, each inside its caller.
int copy_inlines(const perfjit_code &c, std::vector<CodeImage::Inline> &out)
{
	// The ranges of the callers of the entry being read, outermost first.
	std::vector<std::pair<uint64_t, uint64_t>> callers{{0, c.len}};

	if (c.nr_inlines && !c.inlines)
		return -EINVAL;
	for (size_t i = 0; i < c.nr_inlines; i++) {
		const perfjit_inline &in = c.inlines[i];

		if (!in.name || !in.name[0] || in.start >= in.end || in.end > c.len || !in.depth ||
		    in.depth > callers.size() || (i && in.start < c.inlines[i - 1].start))
			return -EINVAL;
		// A sibling before this one, under the same caller, must end
		// before it starts.
		if (callers.size() > in.depth && in.start < callers[in.depth].second)
			return -EINVAL;
		callers.resize(in.depth);
		if (in.start < callers.back().first || in.end > callers.back().second)
			return -EINVAL;
		callers.emplace_back(in.start, in.end);
		out.push_back({in.start, in.end, in.name, in.file ? in.file : "", in.call_line,
			       in.depth});
	}
	return 0;
}

} // namespace

int CodeImage::from(const perfjit_code &caller, CodeImage &out)
{
	perfjit_code c;
	// Every version has the fields up to len; those past the caller's
	// size are absent (zero), as copy_versioned() reads it.
	const int err = copy_versioned(caller, offsetof(perfjit_code, source_file), c);

	if (err)
		return err;
	if (!c.name || !c.name[0] || !c.addr || !c.len)
		return -EINVAL;
	if ((c.nr_lines && (!c.lines || !c.source_file)) || (c.eh_frame_len && !c.eh_frame))
		return -EINVAL;
	for (size_t i = 0; i < c.nr_lines; i++) {
		if (c.lines[i].offset >= c.len || (i && c.lines[i].offset < c.lines[i - 1].offset))
			return -EINVAL;
	}
	out.name = c.name;
	out.generation = c.generation;
	out.addr = reinterpret_cast<uintptr_t>(c.addr);
	const auto *code = static_cast<const uint8_t *>(c.addr);
	out.code.assign(code, code + c.len);
	out.source_file = c.source_file ? c.source_file : "";
	out.lines.assign(c.lines, c.lines + c.nr_lines);
	const auto *eh = static_cast<const uint8_t *>(c.eh_frame);
	out.eh_frame.assign(eh, eh + c.eh_frame_len);
	out.inlines.clear();
	return copy_inlines(c, out.inlines);
}

namespace
{

struct MdCtxDeleter {
	void operator()(EVP_MD_CTX *ctx) const { EVP_MD_CTX_free(ctx); }
};

void hash_bytes(EVP_MD_CTX *ctx, const void *data, size_t len)
{
	const uint64_t len64 = len;

	// Length-prefixed, so that moving bytes between fields changes the hash.
	EVP_DigestUpdate(ctx, &len64, sizeof(len64));
	EVP_DigestUpdate(ctx, data, len);
}

} // namespace

namespace
{

using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

// SHA-1, fetched from OpenSSL's providers once: EVP_sha1() makes every
// EVP_DigestInit_ex() fetch it again, which costs more than hashing a
// function (OpenSSL 3's "Performance" notes say to fetch explicitly).
const EVP_MD *sha1()
{
	static const EVP_MD *const md = [] {
		const EVP_MD *fetched = EVP_MD_fetch(nullptr, "SHA1", nullptr);

		return fetched ? fetched : EVP_sha1();
	}();
	return md;
}

MdCtx sha1_begin(const char *what)
{
	MdCtx ctx(EVP_MD_CTX_new());

	if (!ctx)
		throw std::bad_alloc();
	// Whoever calls the library gets -EIO, and its log this.
	if (!EVP_DigestInit_ex(ctx.get(), sha1(), nullptr))
		throw std::runtime_error("OpenSSL cannot compute SHA-1 for a build-id");
	hash_bytes(ctx.get(), what, strlen(what));
	return ctx;
}

BuildId sha1_end(const MdCtx &ctx)
{
	BuildId id{};
	unsigned int len = 0;

	EVP_DigestFinal_ex(ctx.get(), id.data(), &len);
	return id;
}

void hash_image(EVP_MD_CTX *ctx, const CodeImage &image)
{
	hash_bytes(ctx, image.name.data(), image.name.size());
	hash_bytes(ctx, &image.generation, sizeof(image.generation));
	hash_bytes(ctx, image.code.data(), image.code.size());
	hash_bytes(ctx, image.source_file.data(), image.source_file.size());
	hash_bytes(ctx, image.lines.data(), image.lines.size() * sizeof(perfjit_line));
	hash_bytes(ctx, image.eh_frame.data(), image.eh_frame.size());
	// Nothing more for code without inlining: its build-id is as before.
	for (const auto &in : image.inlines) {
		const uint64_t nums[] = {in.start, in.end, in.call_line, in.depth};

		hash_bytes(ctx, nums, sizeof(nums));
		hash_bytes(ctx, in.name.data(), in.name.size());
		hash_bytes(ctx, in.file.data(), in.file.size());
	}
}

} // namespace

BuildId build_id_of(const CodeImage &image)
{
	MdCtx ctx = sha1_begin("perfjit side file v1");

	hash_image(ctx.get(), image);
	return sha1_end(ctx);
}

std::string build_id_hex(const BuildId &id)
{
	static const char digits[] = "0123456789abcdef";
	std::string s;

	for (uint8_t b : id) {
		s += digits[b >> 4];
		s += digits[b & 15];
	}
	return s;
}

std::string side_file_path(const std::string &buildid_dir, const BuildId &id)
{
	const std::string hex = build_id_hex(id);

	return buildid_dir + "/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2);
}

bool adjacent(uint64_t prev_addr, uint64_t prev_len, uint64_t next_addr)
{
	const uint64_t prev_end = prev_addr + prev_len;

	return prev_addr && next_addr >= prev_end && next_addr - prev_end < kAdjacentGap;
}

bool adjacent(const CodeImage &prev, const CodeImage &next)
{
	return adjacent(prev.addr, prev.code.size(), next.addr);
}

uint64_t pack_next_offset(const Pack &pack, const std::vector<uint64_t> &offsets)
{
	const size_t i = offsets.size();

	if (!i)
		return (kTextOffset + 15) & ~uint64_t{15};
	if (adjacent(pack[i - 1], pack[i]))
		return offsets.back() + (pack[i].addr - pack[i - 1].addr);
	return (offsets.back() + pack[i - 1].code.size() + 15) & ~uint64_t{15};
}

std::vector<uint64_t> pack_layout(const Pack &pack)
{
	std::vector<uint64_t> offsets;

	offsets.reserve(pack.size());
	while (offsets.size() < pack.size())
		offsets.push_back(pack_next_offset(pack, offsets));
	return offsets;
}

BuildId unique_build_id()
{
	static std::atomic<uint64_t> counter{0};
	struct {
		uint64_t pid;
		uint64_t ns;
		uint64_t n;
		uint8_t random[16];
	} seed{};
	struct timespec ts {
	};

	clock_gettime(CLOCK_REALTIME, &ts);
	seed.pid = static_cast<uint64_t>(getpid());
	seed.ns =
		static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
	seed.n = counter.fetch_add(1, std::memory_order_relaxed);
	// Without random bytes, the rest is unique still.
	(void)!getrandom(seed.random, sizeof(seed.random), GRND_NONBLOCK);
	MdCtx ctx = sha1_begin("perfjit open pack v1");
	hash_bytes(ctx.get(), &seed, sizeof(seed));
	return sha1_end(ctx);
}

BuildId build_id_of(const Pack &pack)
{
	if (pack.size() == 1)
		return build_id_of(pack[0]);

	// One pass over everything: hashing is most of what a load costs
	// while nobody records.
	const std::vector<uint64_t> offsets = pack_layout(pack);
	MdCtx ctx = sha1_begin("perfjit pack v1");
	for (size_t i = 0; i < pack.size(); i++) {
		hash_image(ctx.get(), pack[i]);
		hash_bytes(ctx.get(), &offsets[i], sizeof(offsets[i]));
	}
	return sha1_end(ctx);
}

namespace
{

struct ElfDeleter {
	void operator()(Elf *elf) const { elf_end(elf); }
};

// A section to lay out: its contents and ELF header fields.
struct Section {
	const char *name;
	uint32_t type;
	uint64_t flags;
	uint64_t align;
	const void *data;
	size_t size;
	uint64_t addr = 0;
	uint32_t link = 0;
	uint32_t info = 0;
	uint64_t entsize = 0;
	uint64_t offset = 0;
	size_t name_off = 0;
	size_t index = 0;
};

uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

struct BuildIdNote {
	Elf64_Nhdr nhdr;
	char name[4];
	uint8_t desc[20];
};

// The generations note: what perf shows as each function's generation
// (jit-interface.txt in perf's documentation): "perfjit", type
// kGenerationsNoteType, and for each function {u64 address, u32 generation,
// u32 zero}, in address order, in the file's byte order.
std::vector<uint8_t> generations_note(const Pack &pack, const std::vector<uint64_t> &offsets)
{
	static const char name[] = "perfjit"; // 8 bytes with its NUL: no padding
	const size_t entry = 16;
	Elf64_Nhdr nhdr{};
	nhdr.n_namesz = sizeof(name);
	nhdr.n_descsz = pack.size() * entry;
	nhdr.n_type = kGenerationsNoteType;

	std::vector<uint8_t> note(sizeof(nhdr) + sizeof(name) + nhdr.n_descsz, 0);
	memcpy(note.data(), &nhdr, sizeof(nhdr));
	memcpy(note.data() + sizeof(nhdr), name, sizeof(name));
	uint8_t *desc = note.data() + sizeof(nhdr) + sizeof(name);
	for (size_t i = 0; i < pack.size(); i++) { // offsets ascend (pack_layout)
		memcpy(desc + i * entry, &offsets[i], sizeof(offsets[i]));
		memcpy(desc + i * entry + 8, &pack[i].generation, sizeof(pack[i].generation));
	}
	return note;
}

uint64_t eh_frame_addr_after(uint64_t code_end)
{
	return align_up(code_end, 8);
}

// A cursor over one function's .eh_frame; every read is bounds-checked.
class EhReader
{
public:
	EhReader(const std::vector<uint8_t> &b, size_t pos, size_t end)
	    : b_(b), pos_(pos), end_(end)
	{
	}

	bool ok() const { return ok_; }
	size_t pos() const { return pos_; }
	uint8_t u8() { return fetch<uint8_t>(); }
	uint32_t u32() { return fetch<uint32_t>(); }
	void skip_leb()
	{
		while (ok_ && (u8() & 0x80))
			;
	}
	std::string str()
	{
		std::string s;

		for (uint8_t c = u8(); ok_ && c; c = u8())
			s += static_cast<char>(c);
		return s;
	}

private:
	template <typename T>
	T fetch()
	{
		T v{};

		if (!ok_ || end_ - pos_ < sizeof(T)) {
			ok_ = false;
			return v;
		}
		memcpy(&v, &b_[pos_], sizeof(T));
		pos_ += sizeof(T);
		return v;
	}

	const std::vector<uint8_t> &b_;
	size_t pos_;
	size_t end_;
	bool ok_ = true;
};

// An FDE's initial location: where it is in the table, and how it is encoded.
struct FdeAddress {
	size_t at;
	uint8_t encoding;
	size_t fde; // where the FDE starts (its length field)
};

// Finds the initial location of every FDE in @eh, up to its zero terminator
// or its end (@len); false if the table uses what a move cannot keep.
bool parse_eh_frame(const std::vector<uint8_t> &eh, std::vector<FdeAddress> &fdes, size_t &len)
{
	std::map<size_t, uint8_t> cie_encoding;
	size_t pos = 0;

	while (pos < eh.size()) {
		EhReader r(eh, pos, eh.size());
		const uint32_t length = r.u32();

		if (!r.ok() || length == 0xffffffff || length > eh.size() - r.pos())
			return false; // truncated, or 64-bit DWARF: not what a JIT writes
		if (length == 0)
			break; // terminator
		const size_t next = r.pos() + length;
		EhReader e(eh, r.pos(), next);
		const size_t id_at = e.pos();
		const uint32_t id = e.u32();

		if (id == 0) {
			const uint8_t version = e.u8();
			const std::string aug = e.str();
			uint8_t encoding = DW_EH_PE_absptr;

			e.skip_leb(); // code alignment
			e.skip_leb(); // data alignment
			if (version == 1)
				e.u8();
			else
				e.skip_leb(); // return address register
			if (!aug.empty()) {
				if (aug[0] != 'z')
					return false;
				e.skip_leb(); // augmentation data length
				for (char c : aug.substr(1)) {
					if (c == 'R')
						encoding = e.u8();
					else if (c != 'S')
						return false; // a personality or an LSDA
				}
			}
			if (!e.ok())
				return false;
			cie_encoding[pos] = encoding;
		} else {
			// The CIE pointer counts back from where it is stored.
			auto cie = id > id_at ? cie_encoding.end() : cie_encoding.find(id_at - id);

			if (cie == cie_encoding.end())
				return false;
			const uint8_t format = cie->second & 0x0f;
			const uint8_t application = cie->second & 0xf0;
			const size_t width =
				format == DW_EH_PE_udata4 || format == DW_EH_PE_sdata4 ? 4 : 8;

			if ((format != DW_EH_PE_absptr && format != DW_EH_PE_udata8 &&
			     format != DW_EH_PE_sdata8 && width != 4) ||
			    (application != 0 && application != DW_EH_PE_pcrel) ||
			    next - e.pos() < width)
				return false;
			fdes.push_back({e.pos(), cie->second, pos});
		}
		pos = next;
	}
	len = pos;
	return true;
}

// Moves @in, written for code at kTextOffset followed by the table, to code
// at @code_addr and the table at @eh_addr, appending it to @out without its
// terminator.
bool relocate_eh_frame(const std::vector<uint8_t> &in, uint64_t code_addr, uint64_t eh_addr,
		       uint64_t code_len, std::vector<uint8_t> &out)
{
	const int64_t old_code = kTextOffset;
	const int64_t old_eh = eh_frame_addr_after(kTextOffset + code_len);
	std::vector<FdeAddress> fdes;
	size_t len;

	if (!parse_eh_frame(in, fdes, len))
		return false;
	const size_t base = out.size();
	out.insert(out.end(), in.begin(), in.begin() + len);
	for (const auto &f : fdes) {
		const bool pcrel = f.encoding & DW_EH_PE_pcrel;
		const int64_t delta =
			pcrel ? (old_eh - old_code) - (static_cast<int64_t>(eh_addr) -
						       static_cast<int64_t>(code_addr))
			      : static_cast<int64_t>(code_addr) - old_code;
		uint8_t *p = &out[base + f.at];

		switch (f.encoding & 0x0f) {
		case DW_EH_PE_udata4:
		case DW_EH_PE_sdata4: {
			int32_t v;
			memcpy(&v, p, sizeof(v));
			const int64_t moved = static_cast<int64_t>(v) + delta;
			if (moved != static_cast<int32_t>(moved))
				return false;
			v = static_cast<int32_t>(moved);
			memcpy(p, &v, sizeof(v));
			break;
		}
		default: {
			uint64_t v;
			memcpy(&v, p, sizeof(v));
			v += static_cast<uint64_t>(delta);
			memcpy(p, &v, sizeof(v));
			break;
		}
		}
	}
	return true;
}

// The code of @pack, laid out at @offsets (relative to kTextOffset), with
// int3 between functions.
std::vector<uint8_t> pack_text(const Pack &pack, const std::vector<uint64_t> &offsets)
{
	std::vector<uint8_t> text(offsets.back() + pack.back().code.size() - kTextOffset,
				  host::kCodePad);

	for (size_t i = 0; i < pack.size(); i++)
		std::copy(pack[i].code.begin(), pack[i].code.end(),
			  text.begin() + (offsets[i] - kTextOffset));
	return text;
}

// A libelf call failed: its own message into *@why. -EIO.
int elf_failed(std::string *why, const char *call)
{
	if (why)
		*why = std::string(call) + ": " + elf_errmsg(-1);
	return -EIO;
}

// Writes the ELF image into a memory stream, laying it out by hand
// (ELF_F_LAYOUT): the code must sit at kTextOffset, at address kTextOffset.
int write_elf(int fd, const Pack &pack, const BuildId &id, std::string *why)
{
	if (pack.empty())
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return failed(why, -ENOSYS, "elf_version");
	// ELF_C_WRITE, not ELF_C_WRITE_MMAP: writing through a mapping turns a
	// full disk into SIGBUS in the runtime instead of an error.
	std::unique_ptr<Elf, ElfDeleter> elf(elf_begin(fd, ELF_C_WRITE, nullptr));
	if (!elf)
		return elf_failed(why, "elf_begin");
	elf_flagelf(elf.get(), ELF_C_SET, ELF_F_LAYOUT);

	const std::vector<uint64_t> offsets = pack_layout(pack);
	const std::vector<uint8_t> text = pack_text(pack, offsets);
	const uint64_t eh_addr = eh_frame_addr_after(kTextOffset + text.size());

	// One function's table is taken as it is; a pack's are moved next to
	// each other, with one terminator.
	std::vector<uint8_t> eh_frame;
	if (pack.size() == 1) {
		eh_frame = pack[0].eh_frame;
	} else {
		for (size_t i = 0; i < pack.size(); i++) {
			if (!pack[i].eh_frame.empty() &&
			    !relocate_eh_frame(pack[i].eh_frame, offsets[i],
					       eh_addr + eh_frame.size(), pack[i].code.size(),
					       eh_frame))
				return -EINVAL;
		}
		if (!eh_frame.empty())
			eh_frame.resize(eh_frame.size() + 4, 0);
	}

	BuildIdNote note{};
	note.nhdr.n_namesz = 4;
	note.nhdr.n_descsz = sizeof(note.desc);
	note.nhdr.n_type = NT_GNU_BUILD_ID;
	memcpy(note.name, "GNU", 4);
	memcpy(note.desc, id.data(), id.size());

	const std::vector<uint8_t> gen_note = generations_note(pack, offsets);

	std::string strtab(1, '\0');
	std::vector<Elf64_Sym> syms(pack.size() + 1);
	DwarfSections dwarf;
	for (size_t i = 0; i < pack.size(); i++) {
		Elf64_Sym &sym = syms[i + 1];

		sym.st_name = strtab.size();
		sym.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
		sym.st_shndx = 1; // .text
		sym.st_value = offsets[i];
		sym.st_size = pack[i].code.size();
		strtab += pack[i].name;
		strtab += '\0';
		if (!pack[i].lines.empty() || !pack[i].inlines.empty())
			append_line_info(dwarf, pack[i], offsets[i]);
	}

	// The header with its search table, which libunwind needs to find an
	// FDE (and libdw uses if present); a table it cannot index is left
	// without one, as before.
	const uint64_t hdr_addr = align_up(eh_addr + eh_frame.size(), 4);
	const std::vector<uint8_t> eh_frame_hdr = make_eh_frame_hdr(eh_frame, eh_addr, hdr_addr);

	std::vector<Section> sections;
	sections.push_back({".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 16, text.data(),
			    text.size(), kTextOffset});
	if (!eh_frame.empty())
		sections.push_back({".eh_frame", SHT_PROGBITS, SHF_ALLOC, 8, eh_frame.data(),
				    eh_frame.size(), eh_addr});
	if (!eh_frame_hdr.empty())
		sections.push_back({".eh_frame_hdr", SHT_PROGBITS, SHF_ALLOC, 4,
				    eh_frame_hdr.data(), eh_frame_hdr.size(), hdr_addr});
	sections.push_back({".note.gnu.build-id", SHT_NOTE, SHF_ALLOC, 4, &note, sizeof(note)});
	sections.push_back({".note.perfjit", SHT_NOTE, 0, 4, gen_note.data(), gen_note.size()});
	const size_t symtab_at = sections.size();
	sections.push_back(
		{".symtab", SHT_SYMTAB, 0, 8, syms.data(), syms.size() * sizeof(syms[0])});
	sections.back().info = 1;
	sections.back().entsize = sizeof(Elf64_Sym);
	sections.push_back({".strtab", SHT_STRTAB, 0, 1, strtab.data(), strtab.size()});
	sections[symtab_at].link = sections.size(); // index of .strtab (1-based below)
	if (!dwarf.info.empty()) {
		sections.push_back({".debug_abbrev", SHT_PROGBITS, 0, 1, dwarf.abbrev.data(),
				    dwarf.abbrev.size()});
		sections.push_back(
			{".debug_info", SHT_PROGBITS, 0, 1, dwarf.info.data(), dwarf.info.size()});
		sections.push_back(
			{".debug_line", SHT_PROGBITS, 0, 1, dwarf.line.data(), dwarf.line.size()});
		sections.push_back({".debug_aranges", SHT_PROGBITS, 0, 1, dwarf.aranges.data(),
				    dwarf.aranges.size()});
	}

	std::string shstrtab(1, '\0');
	for (auto &s : sections) {
		s.name_off = shstrtab.size();
		shstrtab += s.name;
		shstrtab += '\0';
	}
	const size_t shstrtab_name = shstrtab.size();
	shstrtab += ".shstrtab";
	shstrtab += '\0';
	sections.push_back({".shstrtab", SHT_STRTAB, 0, 1, shstrtab.data(), shstrtab.size()});
	sections.back().name_off = shstrtab_name;

	// Lay out: the code at kTextOffset, the rest after it in order.
	uint64_t off = kTextOffset;
	for (size_t i = 0; i < sections.size(); i++) {
		auto &s = sections[i];
		off = align_up(off, s.align);
		if (s.addr && s.addr != off)
			return -EINVAL; // only .text and .eh_frame have addresses: cannot happen
		s.offset = off;
		s.index = i + 1;
		off += s.size;
	}
	// The program headers follow the ELF header, unless two of them would
	// not fit before the code: then they follow the section headers (libelf
	// fills what lies between the sections' data and the section headers).
	const size_t nr_phdrs = eh_frame_hdr.empty() ? 1 : 2;
	const uint64_t shoff = align_up(off, 8);
	uint64_t phoff = sizeof(Elf64_Ehdr);
	if (phoff + nr_phdrs * sizeof(Elf64_Phdr) > kTextOffset)
		phoff = shoff + (sections.size() + 1) * sizeof(Elf64_Shdr);

	Elf64_Ehdr *ehdr = elf64_newehdr(elf.get());
	if (!ehdr)
		return elf_failed(why, "elf64_newehdr");
	ehdr->e_ident[EI_DATA] = host::kElfData;
	ehdr->e_type = ET_DYN;
	ehdr->e_machine = host::kElfMachine;
	ehdr->e_version = EV_CURRENT;
	ehdr->e_entry = kTextOffset;
	ehdr->e_phoff = phoff;
	ehdr->e_shoff = shoff;
	ehdr->e_shstrndx = sections.back().index;

	Elf64_Phdr *phdr = elf64_newphdr(elf.get(), nr_phdrs);
	if (!phdr)
		return elf_failed(why, "elf64_newphdr");
	phdr->p_type = PT_LOAD;
	phdr->p_offset = kTextOffset;
	phdr->p_vaddr = kTextOffset;
	phdr->p_paddr = kTextOffset;
	phdr->p_filesz = eh_frame.empty() ? text.size() : eh_addr + eh_frame.size() - kTextOffset;
	if (!eh_frame_hdr.empty())
		phdr->p_filesz = hdr_addr + eh_frame_hdr.size() - kTextOffset;
	phdr->p_memsz = phdr->p_filesz;
	phdr->p_flags = PF_R | PF_X;
	phdr->p_align = 16;
	if (!eh_frame_hdr.empty()) {
		Elf64_Phdr &eh = phdr[1];

		eh.p_type = PT_GNU_EH_FRAME;
		eh.p_offset = eh.p_vaddr = eh.p_paddr = hdr_addr;
		eh.p_filesz = eh.p_memsz = eh_frame_hdr.size();
		eh.p_flags = PF_R;
		eh.p_align = 4;
	}
	for (const auto &s : sections) {
		Elf_Scn *scn = elf_newscn(elf.get());
		if (!scn)
			return elf_failed(why, "elf_newscn");
		Elf_Data *d = elf_newdata(scn);
		if (!d)
			return elf_failed(why, "elf_newdata");
		d->d_buf = const_cast<void *>(s.data);
		d->d_size = s.size;
		d->d_align = s.align;
		d->d_off = 0;
		d->d_type = s.type == SHT_SYMTAB ? ELF_T_SYM
						 : (s.type == SHT_NOTE ? ELF_T_NHDR : ELF_T_BYTE);
		d->d_version = EV_CURRENT;
		Elf64_Shdr *shdr = elf64_getshdr(scn);
		if (!shdr)
			return elf_failed(why, "elf64_getshdr");
		shdr->sh_name = s.name_off;
		shdr->sh_type = s.type;
		shdr->sh_flags = s.flags;
		shdr->sh_addr = s.addr;
		shdr->sh_offset = s.offset;
		shdr->sh_size = s.size;
		shdr->sh_link = s.link;
		shdr->sh_info = s.info;
		shdr->sh_addralign = s.align;
		shdr->sh_entsize = s.entsize;
	}
	// A full disk is ENOSPC from the write() under elf_update(): errno,
	// which is then what libelf's message does not say.
	errno = 0;
	if (elf_update(elf.get(), ELF_C_WRITE) < 0) {
		const int saved = errno;

		elf_failed(why, "elf_update");
		if (why && saved)
			*why += std::string(" (") + strerror(saved) + ")";
		return saved ? -saved : -EIO;
	}
	return 0;
}

} // namespace

std::vector<uint8_t> make_eh_frame_hdr(const std::vector<uint8_t> &eh_frame, uint64_t eh_addr,
				       uint64_t hdr_addr)
{
	std::vector<FdeAddress> fdes;
	std::vector<std::pair<int32_t, int32_t>> table;
	size_t len;

	if (eh_frame.empty() || !parse_eh_frame(eh_frame, fdes, len))
		return {};
	const auto rel = [hdr_addr](uint64_t addr, int32_t &out) {
		const int64_t d = static_cast<int64_t>(addr - hdr_addr);

		out = static_cast<int32_t>(d);
		return d == out;
	};
	for (const auto &f : fdes) {
		const uint8_t *p = &eh_frame[f.at];
		uint64_t loc;

		if ((f.encoding & 0x0f) == DW_EH_PE_udata4 ||
		    (f.encoding & 0x0f) == DW_EH_PE_sdata4) {
			int32_t v;
			memcpy(&v, p, sizeof(v));
			loc = (f.encoding & 0x0f) == DW_EH_PE_sdata4
				      ? static_cast<uint64_t>(int64_t{v})
				      : static_cast<uint32_t>(v);
		} else {
			memcpy(&loc, p, sizeof(loc));
		}
		if (f.encoding & DW_EH_PE_pcrel)
			loc += eh_addr + f.at;
		std::pair<int32_t, int32_t> row;
		if (!rel(loc, row.first) || !rel(eh_addr + f.fde, row.second))
			return {};
		table.push_back(row);
	}
	std::sort(table.begin(), table.end());

	std::vector<uint8_t> hdr;
	const auto put = [&hdr](const void *v, size_t n) {
		hdr.insert(hdr.end(), static_cast<const uint8_t *>(v),
			   static_cast<const uint8_t *>(v) + n);
	};
	int32_t eh_ptr;
	if (!rel(eh_addr - 4, eh_ptr)) // pc-relative to the field, 4 bytes in
		return {};
	const uint32_t count = table.size();
	hdr = {1, DW_EH_PE_pcrel | DW_EH_PE_sdata4, DW_EH_PE_udata4,
	       DW_EH_PE_datarel | DW_EH_PE_sdata4};
	put(&eh_ptr, sizeof(eh_ptr));
	put(&count, sizeof(count));
	for (const auto &row : table) {
		put(&row.first, sizeof(row.first));
		put(&row.second, sizeof(row.second));
	}
	return hdr;
}

bool eh_frame_relocatable(const CodeImage &image)
{
	std::vector<FdeAddress> fdes;
	size_t len;

	return image.eh_frame.empty() || parse_eh_frame(image.eh_frame, fdes, len);
}

int make_elf(const Pack &pack, const BuildId &id, std::vector<uint8_t> &out)
{
	UniqueFd fd(memfd_create("perfjit-elf", MFD_CLOEXEC));
	struct stat st;

	if (!fd)
		return -errno;
	int err = write_elf(fd.get(), pack, id, nullptr);
	if (err)
		return err;
	if (fstat(fd.get(), &st))
		return -errno;
	out.resize(st.st_size);
	if (pread(fd.get(), out.data(), out.size(), 0) != st.st_size)
		return -EIO;
	return 0;
}

int make_elf(const CodeImage &image, const BuildId &id, std::vector<uint8_t> &out)
{
	return make_elf(Pack{image}, id, out);
}

bool side_file_intact(const std::string &path, const BuildId &id)
{
	UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));

	if (!fd || elf_version(EV_CURRENT) == EV_NONE)
		return false;
	// Mapped, not read: a pack's file may hold megabytes of code, and only
	// its section headers and notes are looked at.
	std::unique_ptr<Elf, ElfDeleter> elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
	if (!elf || elf_kind(elf.get()) != ELF_K_ELF)
		return false;
	// Its build-id note says @id: what perf checks before it uses a file.
	// The sections before it were written first, and the section headers
	// last, so a file cut short has no note to read.
	Elf_Scn *scn = nullptr;
	while ((scn = elf_nextscn(elf.get(), scn))) {
		GElf_Shdr shdr;
		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
			continue;
		Elf_Data *data = elf_getdata(scn, nullptr);
		size_t off = 0, name_off, desc_off;
		GElf_Nhdr nhdr;
		while (data && (off = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
			const auto *bytes = static_cast<const uint8_t *>(data->d_buf);

			if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 &&
			    !memcmp(bytes + name_off, "GNU", 4))
				return nhdr.n_descsz == id.size() &&
				       !memcmp(bytes + desc_off, id.data(), id.size());
		}
	}
	return false;
}

int refresh_side_file(const std::string &buildid_dir, const BuildId &id)
{
	const std::string path = side_file_path(buildid_dir, id);
	struct stat st;

	// Another user's regular file that this one cannot read (mode 0600 in
	// a shared directory) can be neither checked nor replaced: it is taken
	// as it is, as perf, which reads it as its owner or root, will check
	// it. The stat() tells that the directories could be searched.
	if (!side_file_intact(path, id) &&
	    (fstatat(AT_FDCWD, path.c_str(), &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
	     !faccessat(AT_FDCWD, path.c_str(), R_OK, AT_EACCESS) || errno != EACCES))
		return -ENOENT;
	utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
	return 0;
}

int store_side_file(const std::string &buildid_dir, const Pack &pack, const BuildId &id,
		    DirCache *dirs, uint64_t *written, std::string *why, Pins *pins, bool *pinned)
{
	static std::atomic<unsigned long> counter{0};
	const std::string path = side_file_path(buildid_dir, id);
	const std::string dir = path.substr(0, path.rfind('/'));
	bool is_pinned = false;

	if (written)
		*written = 0;
	if (pinned)
		*pinned = false;
	// Stored already, by us, a concurrent writer or an earlier run: never
	// rewritten, but made the newest for a directory's bound (DirBound).
	// Unless it is not whole (a crash tore a file that an older writer
	// had not synced): then it is replaced.
	// Or gone while this session holds a pin of it (for other code of the
	// same build-id): linked back from the pin.
	if (!refresh_side_file(buildid_dir, id) ||
	    (pins && !pins->restore(id) && !refresh_side_file(buildid_dir, id))) {
		const int err = pins ? pins->pin(id, path) : 0;

		// Removed between the two, by a bound that read it before its
		// time was set: written again.
		if (err != -ENOENT) {
			if (pinned)
				*pinned = pins && !err;
			return 0;
		}
	}
	if (!dirs || !dirs->has(id[0])) {
		int err = mkdir_p(dir);

		if (err)
			return failed(why, err, "mkdir " + dir);
		if (dirs)
			dirs->add(id[0]);
	}

	// A name no other writer uses (pid and counter), created 0644 as the
	// rest of the cache.
	const std::string tmp = dir + "/.perfjit-" + std::to_string(getpid()) + "-" +
				std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
	UniqueFd fd(open(tmp.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644));
	if (!fd)
		return failed(why, -errno, "open " + tmp);
	int err = write_elf(fd.get(), pack, id, why);
	if (why && err && !why->empty())
		*why = tmp + ": " + *why;
	struct stat st {
	};
	// Synced before it gets its name: a crash leaves the temporary file
	// torn, never the side file.
	if (!err && fdatasync(fd.get()))
		err = failed(why, -errno, "fdatasync " + tmp);
	if (!err && fstat(fd.get(), &st))
		err = failed(why, -errno, "fstat " + tmp);
	fd.reset();
	// Pinned under its temporary name: it never has one link under its
	// own.
	if (!err && pins)
		is_pinned = !pins->pin(id, tmp);
	// rename() replaces a torn file; two writers of one build-id write
	// the same bytes, and either's file is whole.
	const int renamed = err ? 0 : rename(tmp.c_str(), path.c_str()) ? -errno : 0;
	if (err || renamed) {
		// Undone before anything that could throw.
		unlink(tmp.c_str());
		if (is_pinned)
			pins->unpin(id);
		is_pinned = false;
	} else if (written) {
		*written = st.st_size;
	}
	if (renamed)
		err = failed(why, renamed, "rename to " + path);
	if (pinned)
		*pinned = is_pinned;
	return err;
}

int store_side_file(const std::string &buildid_dir, const CodeImage &image, const BuildId &id,
		    DirCache *dirs)
{
	return store_side_file(buildid_dir, Pack{image}, id, dirs);
}

namespace
{

int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

// The build-id that .build-id/@prefix/@name names, if it is a 20-byte one
// in the cache's lower-case hex.
bool parse_build_id(const char *prefix, const char *name, BuildId &id)
{
	const std::string hex = std::string(prefix) + name;

	if (hex.size() != 2 * id.size())
		return false;
	for (size_t i = 0; i < id.size(); i++) {
		const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		id[i] = static_cast<uint8_t>(hi << 4 | lo);
	}
	return true;
}

struct DirCloser {
	void operator()(DIR *d) const { closedir(d); }
};
using UniqueDir = std::unique_ptr<DIR, DirCloser>;

// Opens the directory @name under @at, not through a symbolic link; null if
// it cannot be read.
UniqueDir open_dir_at(int at, const char *name)
{
	UniqueFd fd(openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	UniqueDir dir(fd ? fdopendir(fd.get()) : nullptr);

	if (dir)
		fd.release();
	return dir;
}

bool same_time(const timespec &a, const timespec &b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

} // namespace

int DirBound::prune(const std::string &buildid_dir, const Keep &keep, Result *result)
{
	struct File {
		timespec mtime;
		uint64_t size;
		std::string path; // under .build-id
		BuildId id;
	};
	std::vector<File> files;
	uint64_t total = 0;
	const std::string root_path = buildid_dir + "/.build-id";
	UniqueFd root(open(root_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	UniqueDir top = root ? open_dir_at(root.get(), ".") : nullptr;
	const time_t stale = time(nullptr) - 3600;

	if (!top) {
		const int err = errno;

		// Nothing stored yet: measured again after the next writes.
		room_.store(static_cast<int64_t>(max_));
		return err == ENOENT ? 0 : -err;
	}
	// Their files, unpinned, may go now.
	Pins::remove_ended(buildid_dir);
	while (const dirent *sub = readdir(top.get())) {
		if (strlen(sub->d_name) != 2 || hex_digit(sub->d_name[0]) < 0 ||
		    hex_digit(sub->d_name[1]) < 0)
			continue;
		UniqueDir dir = open_dir_at(root.get(), sub->d_name);

		while (dir) {
			const dirent *e = readdir(dir.get());
			struct stat st;
			File f{};

			if (!e)
				break;
			if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN)
				continue;
			if (fstatat(dirfd(dir.get()), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
			    !S_ISREG(st.st_mode))
				continue;
			// store_side_file()'s temporary, of a writer killed while
			// it wrote.
			if (!strncmp(e->d_name, ".perfjit-", 9) && st.st_mtime < stale) {
				unlinkat(dirfd(dir.get()), e->d_name, 0);
				continue;
			}
			if (!parse_build_id(sub->d_name, e->d_name, f.id))
				continue;
			f.mtime = st.st_mtim;
			f.size = st.st_size;
			f.path = std::string(sub->d_name) + "/" + e->d_name;
			total += f.size;
			files.push_back(std::move(f));
		}
	}

	Result r;
	const uint64_t low = max_ - max_ / 8;
	if (total > max_) {
		const std::vector<BuildId> kept = keep ? keep() : std::vector<BuildId>{};

		std::sort(files.begin(), files.end(), [](const File &a, const File &b) {
			return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec < b.mtime.tv_sec
								: a.mtime.tv_nsec < b.mtime.tv_nsec;
		});
		for (const File &f : files) {
			struct stat st;

			if (total <= low)
				break;
			if (std::binary_search(kept.begin(), kept.end(), f.id))
				continue;
			// Stored or refreshed since it was read: needed again.
			// Pinned: some session's live code (Pins).
			if (!fstatat(root.get(), f.path.c_str(), &st, AT_SYMLINK_NOFOLLOW) &&
			    (!same_time(st.st_mtim, f.mtime) || st.st_nlink > 1))
				continue;
			// Gone already: another writer's bound took it.
			if (unlinkat(root.get(), f.path.c_str(), 0) && errno != ENOENT)
				continue;
			total -= f.size;
			r.removed++;
			r.removed_bytes += f.size;
		}
	}
	r.bytes = total;
	// Files that must stay may keep the directory above the bound: then
	// it is measured again after another eighth of it is written, or
	// kMinRemeasure for a small bound.
	room_.store(static_cast<int64_t>(total < max_ ? max_ - total
						      : std::max(max_ / 8, kMinRemeasure)));
	if (result)
		*result = r;
	return 0;
}

namespace
{

// Removes the pin directory @name under @at, its lock last, closing @lock
// first (NFS would keep an open file under another name, and the
// directory with it): a directory without its lock is one whose session
// is removing it.
void remove_pin_dir(int at, const char *name, UniqueFd &lock)
{
	UniqueFd fd(openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	UniqueDir d(fd ? fdopendir(fd.get()) : nullptr);

	if (!d)
		return;
	const int dir = fd.release();
	while (const dirent *e = readdir(d.get())) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "lock"))
			unlinkat(dir, e->d_name, 0);
	}
	lock.reset();
	unlinkat(dir, "lock", 0);
	unlinkat(at, name, AT_REMOVEDIR);
}

// @id in lower-case hex, without an allocation.
void hex_of(const BuildId &id, char (&out)[2 * sizeof(BuildId) + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < id.size(); i++) {
		out[2 * i] = digits[id[i] >> 4];
		out[2 * i + 1] = digits[id[i] & 15];
	}
	out[2 * id.size()] = 0;
}

// A name no other session has, in any PID namespace: the pid and 8 random
// bytes.
std::string pin_dir_name()
{
	static std::atomic<uint64_t> counter{0};
	uint64_t r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != static_cast<ssize_t>(sizeof(r)))
		r = (static_cast<uint64_t>(time(nullptr)) << 20) ^ counter.fetch_add(1);
	char hex[17];
	snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(r));
	return std::to_string(getpid()) + "-" + hex;
}

} // namespace

bool Pins::is_open() const
{
	std::lock_guard<std::mutex> guard(lock_);

	return static_cast<bool>(dir_);
}

// Made under a name that starts with a dot, which remove_ended() passes
// over, and renamed once its lock is held: a prune never sees a session's
// directory unlocked while the session lives.
int Pins::open(const std::string &buildid_dir, std::string *why)
{
	std::lock_guard<std::mutex> guard(lock_);

	if (dir_)
		return 0;
	const std::string live = buildid_dir + "/.build-id/.live";
	const std::string name = pin_dir_name();
	const std::string tmp = live + "/." + name, path = live + "/" + name;
	int err = mkdir_p(live);

	if (err)
		return failed(why, err, "mkdir " + live);
	if (mkdir(tmp.c_str(), 0755))
		return failed(why, -errno, "mkdir " + tmp);
	UniqueFd dir(::open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	UniqueFd lock(dir ? openat(dir.get(), "lock", O_CREAT | O_RDWR | O_CLOEXEC, 0644) : -1);
	const char *step = "create a lock in ";
	if (lock) {
		step = "lock ";
		if (!flock(lock.get(), LOCK_EX)) {
			step = "rename ";
			if (!rename(tmp.c_str(), path.c_str()))
				step = nullptr;
		}
	}
	if (step) {
		err = failed(why, -errno, step + tmp);
		remove_pin_dir(AT_FDCWD, tmp.c_str(), lock);
		return err;
	}
	owner_ = getpid();
	buildid_dir_ = buildid_dir;
	path_ = path;
	dir_ = std::move(dir);
	lock_fd_ = std::move(lock);
	return 0;
}

int Pins::pin(const BuildId &id, const std::string &path)
{
	std::lock_guard<std::mutex> guard(lock_);

	if (!dir_)
		return -EBADF;
	// Counted first: an allocation that fails leaves no link behind.
	auto it = held_.try_emplace(id, 0).first;
	char hex[2 * sizeof(BuildId) + 1];
	if (it->second) {
		it->second++;
		return 0;
	}
	hex_of(id, hex);
	// A name there already is this session's (an unlink that failed):
	// the same build-id, the same content.
	if (linkat(AT_FDCWD, path.c_str(), dir_.get(), hex, 0) && errno != EEXIST) {
		const int err = -errno;

		held_.erase(it);
		return err;
	}
	it->second = 1;
	return 0;
}

void Pins::unpin(const BuildId &id) noexcept
{
	char hex[2 * sizeof(BuildId) + 1];

	try {
		std::lock_guard<std::mutex> guard(lock_);
		auto it = held_.find(id);

		if (it == held_.end() || --it->second)
			return;
		held_.erase(it);
		hex_of(id, hex);
		unlinkat(dir_.get(), hex, 0);
	} catch (...) {
		// Only the lock can throw: the pin stays until the session ends.
	}
}

int Pins::restore(const BuildId &id)
{
	std::lock_guard<std::mutex> guard(lock_);

	if (!dir_ || !held_.count(id))
		return -ENOENT;
	const std::string file = side_file_path(buildid_dir_, id);
	const std::string hex = build_id_hex(id);
	auto link_back = [&] {
		return !linkat(dir_.get(), hex.c_str(), AT_FDCWD, file.c_str(), 0) ||
		       errno == EEXIST;
	};

	if (link_back())
		return 0;
	// The .build-id/xx directory went as well.
	if (errno != ENOENT || faccessat(dir_.get(), hex.c_str(), F_OK, 0))
		return -errno;
	const int err = mkdir_p(file.substr(0, file.rfind('/')));
	if (err)
		return err;
	return link_back() ? 0 : -errno;
}

void Pins::close()
{
	std::lock_guard<std::mutex> guard(lock_);

	// A child that fork() made without the library's fork handler (a raw
	// clone()) has its parent's directory: never removed from there.
	if (dir_ && owner_ == getpid())
		remove_pin_dir(AT_FDCWD, path_.c_str(), lock_fd_);
	forget_locked();
}

void Pins::before_fork()
{
	lock_.lock();
}

void Pins::after_fork_in_parent()
{
	lock_.unlock();
}

void Pins::after_fork_in_child()
{
	lock_.unlock();
	// Closing the inherited lock leaves the parent's flock(): it belongs
	// to the open file, which the parent holds too.
	forget_locked();
}

void Pins::forget_locked()
{
	dir_.reset();
	lock_fd_.reset();
	path_.clear();
	held_.clear();
}

void Pins::remove_ended(const std::string &buildid_dir)
{
	const std::string live = buildid_dir + "/.build-id/.live";
	UniqueFd root(::open(live.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
	UniqueDir top = root ? open_dir_at(root.get(), ".") : nullptr;
	const time_t stale = time(nullptr) - 3600;

	while (top) {
		const dirent *e = readdir(top.get());
		struct stat st;

		if (!e)
			break;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		UniqueFd dir(openat(root.get(), e->d_name,
				    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
		if (!dir)
			continue;
		// Writable: NFS emulates flock() with a write lock.
		UniqueFd lock(e->d_name[0] == '.' ? -1
						  : openat(dir.get(), "lock", O_RDWR | O_CLOEXEC));
		if (lock) {
			// Held: the session lives. Another error: left alone.
			if (flock(lock.get(), LOCK_EX | LOCK_NB))
				continue;
		} else if (fstat(dir.get(), &st) || st.st_mtime >= stale) {
			// Being made (Pins::open()), or being removed by its
			// session: a moment's work. An hour later, abandoned.
			continue;
		}
		dir.reset();
		remove_pin_dir(root.get(), e->d_name, lock);
	}
}

DirMarker::~DirMarker()
{
	if (addr_)
		munmap(addr_, len_);
}

int DirMarker::map(const std::string &buildid_dir)
{
	static const char text[] = "Side files of JIT code regions, by build-id, are in this "
				   "directory: see perf's jit-interface.txt.\n";
	const std::string dir = buildid_dir + "/.build-id";
	const std::string path = dir + "/.code-regions";

	if (addr_)
		return 0;
	UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
	if (!fd && errno == ENOENT) {
		// As a side file: complete when it appears, never rewritten.
		// A name no other writer uses: two sessions of one process
		// may create it at once.
		static std::atomic<unsigned long> counter{0};
		const std::string tmp =
			dir + "/.perfjit-marker-" + std::to_string(getpid()) + "-" +
			std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
		int err = mkdir_p(dir);

		if (err)
			return err;
		UniqueFd out(open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644));
		if (!out)
			return -errno;
		const bool written = write(out.get(), text, sizeof(text) - 1) ==
				     static_cast<ssize_t>(sizeof(text) - 1);
		if (!written || (link(tmp.c_str(), path.c_str()) && errno != EEXIST))
			err = written ? -errno : -EIO;
		unlink(tmp.c_str());
		if (err)
			return err;
		fd.reset(open(path.c_str(), O_RDONLY | O_CLOEXEC));
	}
	if (!fd)
		return -errno;

	// One page, whatever the file holds: the mapping is only looked at.
	const size_t len = sysconf(_SC_PAGESIZE);
	void *addr = mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd.get(), 0);

	if (addr == MAP_FAILED)
		return -errno;
	addr_ = addr;
	len_ = len;
	return 0;
}

} // namespace perfjit
