// SPDX-License-Identifier: LGPL-2.1-or-later
// The kernel ABI that libperfjit uses, as Documentation/userspace-api/
// perf_mmap3.rst defines it, for building against uapi headers that
// predate it.
#ifndef PERFJIT_UAPI_HPP
#define PERFJIT_UAPI_HPP

#include <linux/perf_event.h>
#include <linux/types.h>
#include <sys/ioctl.h>

namespace perfjit::uapi
{

struct perf_code_region {
	__u32 size;
	__u32 flags;
	__u64 addr;
	__u64 len;
	__u64 pgoff;
	__u64 name;
	__u8 build_id_size;
	__u8 __reserved[3];
	__u8 build_id[20];
};
static_assert(sizeof(perf_code_region) == 64, "PERF_CODE_REGION_SIZE_VER0");

constexpr __u32 PERF_CODE_REGION_UNLOAD = 1U << 0;
constexpr __u32 PERF_CODE_REGION_RUNDOWN = 1U << 1;
constexpr size_t PERF_CODE_REGION_NAME_MAX = 4096;

// prctl(PR_PERF_CODE_REGION, op, arg, 0, 0): announce code, and register an
// eventfd that is signalled when a recorder asks for a rundown.
constexpr int PR_PERF_CODE_REGION = 82;
constexpr unsigned long PR_PERF_CODE_REGION_ANNOUNCE = 1;
constexpr unsigned long PR_PERF_CODE_REGION_REGISTER = 2;

} // namespace perfjit::uapi

#endif
