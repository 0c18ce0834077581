// SPDX-License-Identifier: GPL-2.0
// libbenchtiny.so: the small library mapcost dlopen()s and dlclose()s.
int bench_tiny(int x);

int bench_tiny(int x)
{
	return x * 3 + 1;
}
