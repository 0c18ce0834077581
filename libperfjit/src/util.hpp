// SPDX-License-Identifier: LGPL-2.1-or-later
#ifndef PERFJIT_UTIL_HPP
#define PERFJIT_UTIL_HPP

#include <cerrno>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace perfjit
{

// An owned file descriptor.
class UniqueFd
{
public:
	UniqueFd() = default;
	explicit UniqueFd(int fd) : fd_(fd) {}
	UniqueFd(const UniqueFd &) = delete;
	UniqueFd &operator=(const UniqueFd &) = delete;
	UniqueFd(UniqueFd &&other) noexcept : fd_(other.release()) {}
	UniqueFd &operator=(UniqueFd &&other) noexcept
	{
		reset(other.release());
		return *this;
	}
	~UniqueFd() { reset(); }

	int get() const { return fd_; }
	explicit operator bool() const { return fd_ >= 0; }
	int release()
	{
		int fd = fd_;

		fd_ = -1;
		return fd;
	}
	void reset(int fd = -1)
	{
		if (fd_ >= 0)
			close(fd_);
		fd_ = fd;
	}

private:
	int fd_ = -1;
};

// mkdir -p; 0 or a negative errno.
inline int mkdir_p(const std::string &path)
{
	for (size_t pos = 1; pos <= path.size(); pos++) {
		if (pos != path.size() && path[pos] != '/')
			continue;
		const std::string part = path.substr(0, pos);
		if (mkdir(part.c_str(), 0755) && errno != EEXIST)
			return -errno;
	}
	return 0;
}

} // namespace perfjit

#endif
