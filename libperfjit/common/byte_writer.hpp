// SPDX-License-Identifier: LGPL-2.1-or-later
// Bytes of DWARF and ELF sections, in the host's byte order: what the
// library writes into side files (src/dwarf.cpp) and the demo JIT into its
// unwind tables (examples/calc-jit).
#ifndef PERFJIT_BYTE_WRITER_HPP
#define PERFJIT_BYTE_WRITER_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace perfjit
{

class ByteWriter
{
public:
	std::vector<uint8_t> bytes;

	void u8(uint8_t v) { bytes.push_back(v); }
	void u16(uint16_t v) { raw(&v, sizeof(v)); }
	void u32(uint32_t v) { raw(&v, sizeof(v)); }
	void u64(uint64_t v) { raw(&v, sizeof(v)); }
	// NUL-terminated.
	void str(const std::string &s) { raw(s.c_str(), s.size() + 1); }
	void raw(const void *p, size_t n)
	{
		const auto *b = static_cast<const uint8_t *>(p);

		bytes.insert(bytes.end(), b, b + n);
	}
	// LEB128 (DWARF 5, section 7.6).
	void uleb(uint64_t v)
	{
		do {
			const uint8_t b = v & 0x7f;

			v >>= 7;
			u8(v ? (b | 0x80) : b);
		} while (v);
	}
	void sleb(int64_t v)
	{
		for (;;) {
			const uint8_t b = v & 0x7f;

			v >>= 7; // arithmetic
			if ((v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40))) {
				u8(b);
				return;
			}
			u8(b | 0x80);
		}
	}
	size_t size() const { return bytes.size(); }
	void patch32(size_t at, uint32_t v) { memcpy(&bytes[at], &v, sizeof(v)); }
};

} // namespace perfjit

#endif
