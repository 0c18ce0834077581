// SPDX-License-Identifier: GPL-2.0
/* The shared objects that fault-inject maps: fi-lib1.so and fi-lib2.so, the
 * same code linked with two known build-ids (Makefile). */
int fi_lib_function(int x)
{
	return x * 3 + 1;
}
