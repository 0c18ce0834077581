// SPDX-License-Identifier: LGPL-2.1-or-later
#ifndef PERFJIT_TEST_UTIL_HPP
#define PERFJIT_TEST_UTIL_HPP

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "util.hpp"

// A scratch directory, removed with everything in it.
class TempDir
{
public:
	TempDir()
	{
		char tmpl[] = "/tmp/perfjit-test-XXXXXX";

		if (mkdtemp(tmpl))
			path_ = tmpl;
	}
	~TempDir()
	{
		if (!path_.empty())
			std::system(("rm -rf '" + path_ + "'").c_str());
	}
	TempDir(const TempDir &) = delete;
	TempDir &operator=(const TempDir &) = delete;
	const std::string &path() const { return path_; }

private:
	std::string path_;
};

inline bool has_program(const std::string &name)
{
	return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

// Runs @cmd, its output discarded; its exit status, or -1. Output on
// standard error that mentions a warning or error counts as a failure.
inline int run_quiet(const std::string &cmd)
{
	const std::string full = "{ " + cmd +
				 " >/dev/null; } 2>&1 | grep -qi 'warning\\|error' && exit 99; " +
				 cmd + " >/dev/null 2>&1";
	const int status = std::system(full.c_str());

	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::string run_output(const std::string &cmd)
{
	std::unique_ptr<FILE, int (*)(FILE *)> p(popen(cmd.c_str(), "r"), pclose);
	std::string out;
	char buf[256];

	while (p && fgets(buf, sizeof(buf), p.get()))
		out += buf;
	return out;
}

inline std::vector<uint8_t> read_file(const std::string &path)
{
	std::ifstream in(path, std::ios::binary);

	return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

#endif
