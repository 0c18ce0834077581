/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* perfjit.h compiles as C and its calls work from C. */
#include <errno.h>
#include <string.h>

#include "perfjit.h"

int perfjit_c_api_check(void);

int perfjit_c_api_check(void)
{
	static const unsigned char code[16] = {0xc3};
	struct perfjit_options opts = {.size = sizeof(opts), .mode = PERFJIT_MODE_PERF_MAP};
	struct perfjit_code c = {.size = sizeof(c), .name = "c_fn", .addr = code, .len = 1};
	perfjit_session *s = NULL;

	if (perfjit_open(&opts, &s) || !s)
		return 1;
	if (perfjit_mode(s) != PERFJIT_MODE_PERF_MAP || perfjit_asked(s) != 1 ||
	    perfjit_load(s, &c) || perfjit_unload(s, code) || perfjit_unload(s, code) != -ENOENT ||
	    !strlen(perfjit_strerror(-ENOENT))) {
		perfjit_close(s);
		return 1;
	}
	perfjit_close(s);
	return 0;
}
