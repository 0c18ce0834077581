// SPDX-License-Identifier: LGPL-2.1-or-later
// The ELF identity of the host, whose code a JIT makes: what side files and
// the jitdump header say. Side files are ELFCLASS64 in the host's byte
// order (their DWARF and unwind tables are written as the host lays them
// out); a host this file does not know does not build, rather than write
// files that say another machine.
#ifndef PERFJIT_ELF_HOST_HPP
#define PERFJIT_ELF_HOST_HPP

#include <cstdint>
#include <elf.h>

namespace perfjit
{
namespace host
{

#if defined(__x86_64__)
constexpr uint16_t kElfMachine = EM_X86_64;
constexpr uint8_t kCodePad = 0xcc; // int3
#elif defined(__aarch64__)
constexpr uint16_t kElfMachine = EM_AARCH64;
constexpr uint8_t kCodePad = 0x00; // udf #0
#elif defined(__riscv) && __riscv_xlen == 64
constexpr uint16_t kElfMachine = EM_RISCV;
constexpr uint8_t kCodePad = 0x00; // c.unimp
#elif defined(__powerpc64__)
constexpr uint16_t kElfMachine = EM_PPC64;
constexpr uint8_t kCodePad = 0x00; // an illegal instruction
#elif defined(__s390x__)
constexpr uint16_t kElfMachine = EM_S390;
constexpr uint8_t kCodePad = 0x00; // an illegal instruction
#else
#error "libperfjit: no ELF machine known for this host (src/elf_host.hpp)"
#endif

static_assert(sizeof(void *) == 8, "libperfjit writes ELFCLASS64 side files: a 64-bit host");

constexpr uint8_t kElfData = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;

} // namespace host
} // namespace perfjit

#endif
