// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The options that the runtime agents built on libperfjit share (the JVMTI
// agent, the Node.js addon): a comma-separated list of key=value items.
#ifndef PERFJIT_AGENT_OPTIONS_HPP
#define PERFJIT_AGENT_OPTIONS_HPP

#include <cstdint>
#include <optional>
#include <string>

#include "perfjit.h"

namespace perfjit::agent
{

// "256M", "64K", "1G", "1000000": a size in bytes, not 0; nullopt if @text
// is none of these or too large.
inline std::optional<uint64_t> parse_size(const std::string &text)
{
	uint64_t n = 0;
	size_t i = 0;

	for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; i++) {
		if (n > (UINT64_MAX - 9) / 10)
			return std::nullopt;
		n = n * 10 + (text[i] - '0');
	}
	if (!i || !n)
		return std::nullopt;
	const std::string unit = text.substr(i);
	const unsigned shift = unit.empty()  ? 0
			       : unit == "K" ? 10
			       : unit == "M" ? 20
			       : unit == "G" ? 30
					     : 64;
	if (shift == 64 || n > (UINT64_MAX >> 1) >> shift)
		return std::nullopt;
	return n << shift;
}

// What every agent takes:
//   lines=0|1, stats=0|1, mode=auto|code-region|perf-map|jitdump,
//   dir=PATH, max_dir=SIZE|none
struct CommonOptions {
	bool lines = true;
	bool stats = false;
	uint32_t mode = PERFJIT_MODE_AUTO;
	std::string dir;
	uint64_t max_dir = 0; // perfjit_options::max_dir_bytes
};

// Takes @key=@val into @o; false if it is not one of the common options.
inline bool parse_common(const std::string &key, const std::string &val, CommonOptions &o)
{
	if ((key == "lines" || key == "stats") && (val == "0" || val == "1"))
		(key == "lines" ? o.lines : o.stats) = val == "1";
	else if (key == "mode" && val == "auto")
		o.mode = PERFJIT_MODE_AUTO;
	else if (key == "mode" && val == "code-region")
		o.mode = PERFJIT_MODE_CODE_REGION;
	else if (key == "mode" && val == "perf-map")
		o.mode = PERFJIT_MODE_PERF_MAP;
	else if (key == "mode" && val == "jitdump")
		o.mode = PERFJIT_MODE_JITDUMP;
	else if (key == "dir" && !val.empty())
		o.dir = val;
	else if (key == "max_dir" && val == "none")
		o.max_dir = PERFJIT_DIR_UNBOUNDED;
	else if (key == "max_dir" && parse_size(val))
		o.max_dir = *parse_size(val);
	else
		return false;
	return true;
}

// Calls @take(key, val) for each non-empty item of @text; stops at the
// first item it refuses (returns false) and returns that item, or
// nullopt when it took them all.
template <typename Take>
std::optional<std::string> for_each_option(const char *text, Take take)
{
	const std::string all = text ? text : "";

	for (size_t pos = 0; pos < all.size();) {
		size_t end = all.find(',', pos);
		if (end == std::string::npos)
			end = all.size();
		std::string item = all.substr(pos, end - pos);
		pos = end + 1;
		// "lines=0, stats=1": the spaces around an item are not part of it.
		item.erase(0, item.find_first_not_of(" \t"));
		item.erase(item.find_last_not_of(" \t") + 1);
		const size_t eq = item.find('=');
		if (!item.empty() &&
		    !take(item.substr(0, eq), eq == std::string::npos ? "" : item.substr(eq + 1)))
			return item;
	}
	return std::nullopt;
}

} // namespace perfjit::agent

#endif
