// SPDX-License-Identifier: LGPL-2.1-or-later
// What the agents share: their options and their log.
#include <chrono>
#include <cstdio>
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <thread>

#include "agent_log.hpp"
#include "agent_options.hpp"

namespace
{

// What was written to @f so far.
std::string contents(FILE *f)
{
	std::string out;
	char buf[256];

	fflush(f);
	rewind(f);
	while (fgets(buf, sizeof(buf), f))
		out += buf;
	return out;
}

} // namespace

TEST(AgentOptions, CommonOptions)
{
	perfjit::agent::CommonOptions o;

	const auto bad = perfjit::agent::for_each_option(
		" lines=0, mode=jitdump ,max_dir=64K,dir=/x",
		[&](const std::string &k, const std::string &v) {
			return perfjit::agent::parse_common(k, v, o);
		});
	EXPECT_FALSE(bad);
	EXPECT_FALSE(o.lines);
	EXPECT_EQ(o.mode, PERFJIT_MODE_JITDUMP);
	EXPECT_EQ(o.max_dir, 64u << 10);
	EXPECT_EQ(o.dir, "/x");
	const auto refused = perfjit::agent::for_each_option(
		"stats=1,max_dir=0,lines=1", [&](const std::string &k, const std::string &v) {
			return perfjit::agent::parse_common(k, v, o);
		});
	ASSERT_TRUE(refused);
	EXPECT_EQ(*refused, "max_dir=0");
	EXPECT_TRUE(o.stats);
	EXPECT_FALSE(o.lines) << "an item after the refused one was taken";
}

// A burst of messages (a full disk fails every store) shows kBurst of them,
// and the next window says how many it left out.
TEST(AgentLog, RateLimited)
{
	std::unique_ptr<FILE, int (*)(FILE *)> out(tmpfile(), fclose);
	ASSERT_TRUE(out);
	perfjit::agent::StderrLog log("agent", out.get(), std::chrono::seconds(1));
	perfjit_options o{};
	log.attach(o);

	for (int i = 0; i < 8; i++)
		o.log(o.log_arg, i ? PERFJIT_LOG_ERROR : PERFJIT_LOG_WARNING,
		      ("message " + std::to_string(i)).c_str());
	std::string expected = "agent: warning: message 0\n";
	for (unsigned i = 1; i < perfjit::agent::StderrLog::kBurst; i++)
		expected += "agent: error: message " + std::to_string(i) + "\n";
	expected += "agent: more messages from libperfjit this minute: counted, not shown\n";
	EXPECT_EQ(contents(out.get()), expected);

	std::this_thread::sleep_for(std::chrono::milliseconds(1100));
	fseek(out.get(), 0, SEEK_END);
	o.log(o.log_arg, PERFJIT_LOG_ERROR, "later");
	expected += "agent: 3 more messages from libperfjit not shown\nagent: error: later\n";
	EXPECT_EQ(contents(out.get()), expected);
}
