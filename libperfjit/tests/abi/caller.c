/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A caller of libperfjit built against one version of perfjit.h: CMake
 * compiles this file once per header (tests/abi/0.1, tests/abi/0.2 and the
 * library's own include/), each time with its own ABI_PREFIX, and links
 * them all with the shared library, as programs built against those
 * headers would run with it.
 */
#include <string.h>

#include "perfjit.h"

#define ABI_CAT2(a, b) a##b
#define ABI_CAT(a, b) ABI_CAT2(a, b)
#define FN(name) ABI_CAT(ABI_PREFIX, name)

/* This header's struct, with room for whatever a test puts past it. */
#define ABI_ROOM 512
#define ABI_STRUCT(type, field)                                                                    \
	union {                                                                                    \
		struct type field;                                                                 \
		unsigned char bytes[ABI_ROOM];                                                     \
	}

size_t FN(options_size)(void);
size_t FN(code_size)(void);
int FN(open)(uint32_t size, size_t at, unsigned char poke, perfjit_session **s);
int FN(load)(perfjit_session *s, uint32_t size, size_t at, unsigned char poke, const void *addr,
	     size_t len, const char *name);

size_t FN(options_size)(void)
{
	return sizeof(struct perfjit_options);
}

size_t FN(code_size)(void)
{
	return sizeof(struct perfjit_code);
}

/*
 * A struct of this header that says it is @size bytes long, in @room bytes:
 * zero past the header's fields but for @poke at byte @at (none when @at
 * is 0, nor past @room). The caller sets the fields.
 */
static void lay_out(unsigned char *bytes, size_t room, uint32_t size, size_t at, unsigned char poke)
{
	memset(bytes, 0, room);
	memcpy(bytes, &size, sizeof(size));
	if (at && at < room)
		bytes[at] = poke;
}

/* perfjit_open() of this header's perfjit_options for the perf-PID.map mode. */
int FN(open)(uint32_t size, size_t at, unsigned char poke, perfjit_session **s)
{
	ABI_STRUCT(perfjit_options, o) u;

	lay_out(u.bytes, sizeof(u.bytes), size, at, poke);
	u.o.mode = PERFJIT_MODE_PERF_MAP;
	return perfjit_open(&u.o, s);
}

/* perfjit_load() of this header's perfjit_code. */
int FN(load)(perfjit_session *s, uint32_t size, size_t at, unsigned char poke, const void *addr,
	     size_t len, const char *name)
{
	ABI_STRUCT(perfjit_code, c) u;

	lay_out(u.bytes, sizeof(u.bytes), size, at, poke);
	u.c.name = name;
	u.c.addr = addr;
	u.c.len = len;
	return perfjit_load(s, &u.c);
}
