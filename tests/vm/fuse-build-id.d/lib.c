// SPDX-License-Identifier: GPL-2.0
/*
 * libfbid.so: the ELF file that tests/vm/fuse-build-id maps. Its build-id
 * is fixed by the Makefile (-Wl,--build-id=0x...), so that the test knows
 * what a record must carry.
 */
int fbid_answer(int x);

int fbid_answer(int x)
{
	return x * 6 + 42;
}
