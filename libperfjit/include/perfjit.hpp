// SPDX-License-Identifier: LGPL-2.1-or-later
// A thin C++17 layer over perfjit.h: an owning session, errors as
// std::error_code.
#ifndef PERFJIT_HPP
#define PERFJIT_HPP

#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "perfjit.h"

namespace perfjit
{

struct SessionDeleter {
	void operator()(perfjit_session *s) const noexcept { perfjit_close(s); }
};

inline std::error_code make_error(int err) noexcept
{
	return {-err, std::generic_category()};
}

class Session
{
public:
	// Opens a session; check ok() or error().
	explicit Session(const perfjit_options *opts = nullptr) noexcept
	{
		perfjit_session *s = nullptr;

		err_ = perfjit_open(opts, &s);
		session_.reset(s);
	}

	bool ok() const noexcept { return err_ == 0; }
	std::error_code error() const noexcept { return make_error(err_); }
	int mode() const noexcept { return perfjit_mode(session_.get()); }
	// 1 once a recorder asked (or in a fallback mode): see perfjit_asked().
	int asked() const noexcept { return perfjit_asked(session_.get()); }

	std::error_code load(const perfjit_code &code) noexcept
	{
		return make_error(perfjit_load(session_.get(), &code));
	}
	std::error_code load(const std::string &name, const void *addr, size_t len,
			     uint32_t generation = 0) noexcept
	{
		perfjit_code code{};

		code.size = sizeof(code);
		code.generation = generation;
		code.name = name.c_str();
		code.addr = addr;
		code.len = len;
		return load(code);
	}
	// One side file for all of @codes: see perfjit_load_many().
	std::error_code load(const std::vector<const perfjit_code *> &codes) noexcept
	{
		return make_error(perfjit_load_many(session_.get(), codes.data(), codes.size()));
	}
	std::error_code unload(const void *addr) noexcept
	{
		return make_error(perfjit_unload(session_.get(), addr));
	}
	std::error_code move(const void *from, const void *to) noexcept
	{
		return make_error(perfjit_move(session_.get(), from, to));
	}
	// Announce all live code again for a late recorder: see perfjit_rundown().
	std::error_code rundown() noexcept { return make_error(perfjit_rundown(session_.get())); }
	// Readable when a recorder appeared (PERFJIT_OPEN_NO_THREAD), or -errno.
	int rundown_fd() const noexcept { return perfjit_rundown_fd(session_.get()); }
	perfjit_session *get() const noexcept { return session_.get(); }

private:
	std::unique_ptr<perfjit_session, SessionDeleter> session_;
	int err_ = 0;
};

} // namespace perfjit

#endif
