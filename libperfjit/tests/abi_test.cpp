// SPDX-License-Identifier: LGPL-2.1-or-later
// Callers built against libperfjit 0.1's and 0.2's perfjit.h, and this
// one's, run with the shared library: every versioned struct is read by
// one rule, libbpf's (src/util.hpp, copy_versioned()).
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

#include "perfjit.h"

#define ABI_CALLER(p)                                                                              \
	size_t p##options_size(void);                                                              \
	size_t p##code_size(void);                                                                 \
	int p##open(uint32_t size, size_t at, unsigned char poke, perfjit_session **s);            \
	int p##load(perfjit_session *s, uint32_t size, size_t at, unsigned char poke,              \
		    const void *addr, size_t len, const char *name);

extern "C" {
int perfjit_c_api_check(void);
ABI_CALLER(abi_0_1_)
ABI_CALLER(abi_0_2_)
ABI_CALLER(abi_own_)
}

namespace
{

struct Header {
	const char *version;
	size_t (*options_size)();
	size_t (*code_size)();
	int (*open)(uint32_t, size_t, unsigned char, perfjit_session **);
	int (*load)(perfjit_session *, uint32_t, size_t, unsigned char, const void *, size_t,
		    const char *);
};

#define HEADER(v, p)                                                                               \
	Header                                                                                     \
	{                                                                                          \
		v, p##options_size, p##code_size, p##open, p##load                                 \
	}

const unsigned char kCode[64] = {0xc3};

class Abi : public ::testing::TestWithParam<Header>
{
protected:
	void TearDown() override
	{
		unlink(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str());
	}
};

// perfjit_options of the caller's header: smaller, equal and larger than
// this library's, with zero and non-zero bytes past what it knows.
TEST_P(Abi, Options)
{
	const Header &h = GetParam();
	const auto own = static_cast<uint32_t>(h.options_size());
	const auto ours = static_cast<uint32_t>(sizeof(perfjit_options));
	perfjit_session *s = nullptr;

	ASSERT_EQ(h.open(own, 0, 0, &s), 0);
	EXPECT_EQ(perfjit_mode(s), PERFJIT_MODE_PERF_MAP);
	perfjit_close(s);
	// Shorter than the caller's header: still a version this library
	// reads (the defaults past it), unless it cuts the first version.
	s = nullptr;
	EXPECT_EQ(h.open(own - 8, 0, 0, &s), own - 8 >= PERFJIT_OPTIONS_SIZE_VER0 ? 0 : -EINVAL);
	perfjit_close(s);
	// Not the end of a field.
	EXPECT_EQ(h.open(own + 4, 0, 0, &s), -EINVAL);
	// A newer header's: zero past what this library knows, else refused.
	s = nullptr;
	ASSERT_EQ(h.open(ours + 16, 0, 0, &s), 0);
	perfjit_close(s);
	s = nullptr;
	EXPECT_EQ(h.open(ours + 16, ours + 8, 1, &s), -E2BIG);
	EXPECT_EQ(s, nullptr);
	EXPECT_EQ(h.open(8192, 0, 0, &s), -E2BIG);
}

// perfjit_code of the caller's header, as perfjit_options.
TEST_P(Abi, Code)
{
	const Header &h = GetParam();
	const auto own = static_cast<uint32_t>(h.code_size());
	const auto ours = static_cast<uint32_t>(sizeof(perfjit_code));
	perfjit_session *s = nullptr;

	ASSERT_EQ(h.open(static_cast<uint32_t>(h.options_size()), 0, 0, &s), 0);
	EXPECT_EQ(h.load(s, own, 0, 0, kCode, 8, "abi_equal"), 0);
	EXPECT_EQ(h.load(s, own - 8, 0, 0, kCode + 8, 8, "abi_shorter"), 0);
	// Every version has the fields up to len.
	EXPECT_EQ(h.load(s, offsetof(perfjit_code, len), 0, 0, kCode + 16, 8, "abi_cut"), -EINVAL);
	EXPECT_EQ(h.load(s, own + 4, 0, 0, kCode + 16, 8, "abi_odd"), -EINVAL);
	EXPECT_EQ(h.load(s, ours + 16, 0, 0, kCode + 24, 8, "abi_newer"), 0);
	EXPECT_EQ(h.load(s, ours + 16, ours + 8, 1, kCode + 32, 8, "abi_unknown"), -E2BIG);
	EXPECT_EQ(perfjit_unload(s, kCode + 32), -ENOENT);
	for (size_t off : {0, 8, 24})
		EXPECT_EQ(perfjit_unload(s, kCode + off), 0) << off;
	perfjit_close(s);
}

INSTANTIATE_TEST_SUITE_P(Headers, Abi,
			 ::testing::Values(HEADER("0.1", abi_0_1_), HEADER("0.2", abi_0_2_),
					   HEADER("own", abi_own_)),
			 [](const ::testing::TestParamInfo<Header> &info) {
				 std::string name = info.param.version;
				 for (auto &c : name) {
					 if (c == '.')
						 c = '_';
				 }
				 return "v" + name;
			 });

} // namespace

// perfjit.h compiles as C, and its calls work from C (c_api_test.c).
TEST(CApi, HeaderWorksFromC)
{
	EXPECT_EQ(perfjit_c_api_check(), 0);
}
