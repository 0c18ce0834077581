// SPDX-License-Identifier: LGPL-2.1-or-later
#ifndef PERFJIT_UTIL_HPP
#define PERFJIT_UTIL_HPP

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <type_traits>
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

// A session's perfjit_options::log: says a line, or nothing without one.
class Log
{
public:
	Log() = default;
	Log(void (*fn)(void *, int, const char *), void *arg) : fn_(fn), arg_(arg) {}

	void operator()(int level, const std::string &message) const noexcept
	{
		if (fn_)
			fn_(arg_, level, message.c_str());
	}
	explicit operator bool() const { return fn_ != nullptr; }

private:
	void (*fn_)(void *, int, const char *) = nullptr;
	void *arg_ = nullptr;
};

// For an error's detail: "@what: strerror(-@err)" into *@why (if given);
// returns @err.
inline int failed(std::string *why, int err, const std::string &what)
{
	if (why)
		*why = what + ": " + strerror(-err);
	return err;
}

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

// A caller's versioned struct (perfjit_options, perfjit_code), read by
// libbpf's rule: its first member, a uint32_t, is the size the caller's
// header gave it. A smaller struct, from an older header, leaves the fields
// past its size at zero (their defaults); a larger one, from a newer header,
// must be zero past what this library knows, so that nothing the caller
// asked for is dropped in silence. At least @min_size bytes (the fields
// every version has), a whole number of the struct's alignment, at most a
// page. Copies what is known into @out: 0, -EINVAL or -E2BIG.
template <typename T>
int copy_versioned(const T &in, size_t min_size, T &out)
{
	static_assert(std::is_trivially_copyable<T>::value, "a C struct");
	uint32_t size;

	memcpy(&size, &in, sizeof(size));
	if (size < min_size || size % alignof(T))
		return -EINVAL;
	if (size > 4096)
		return -E2BIG;
	const size_t known = std::min<size_t>(size, sizeof(T));
	const auto *tail = reinterpret_cast<const unsigned char *>(&in) + known;
	if (std::any_of(tail, tail + (size - known), [](unsigned char c) { return c != 0; }))
		return -E2BIG;
	out = T{};
	memcpy(&out, &in, known);
	return 0;
}

} // namespace perfjit

#endif
