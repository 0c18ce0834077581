// SPDX-License-Identifier: LGPL-2.1-or-later
// perfjit-calc: small RAII helpers over the libperfjit C API.
#ifndef PERFJIT_CALC_SESSION_H
#define PERFJIT_CALC_SESSION_H

#include <perfjit.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace calc
{

// A failed libperfjit call; what() is "call(subject): perfjit_strerror(error)".
class PerfjitError : public std::runtime_error
{
public:
	PerfjitError(const char *call, const char *subject, int error)
	    : std::runtime_error(std::string(call) +
				 (subject ? std::string("(") + subject + ")" : "") + ": " +
				 perfjit_strerror(error)),
	      error_(error)
	{
	}

	int error() const noexcept { return error_; }

private:
	int error_;
};

// Returns @ret if it is not a negative errno value, else throws PerfjitError.
inline int check(int ret, const char *call, const char *subject = nullptr)
{
	if (ret < 0)
		throw PerfjitError(call, subject, ret);
	return ret;
}

struct SessionCloser {
	void operator()(perfjit_session *session) const noexcept { perfjit_close(session); }
};

using Session = std::unique_ptr<perfjit_session, SessionCloser>;

inline Session open_session(const perfjit_options &opts)
{
	perfjit_session *session = nullptr;
	check(perfjit_open(&opts, &session), "perfjit_open");
	return Session(session);
}

inline const char *mode_name(int mode)
{
	switch (mode) {
	case PERFJIT_MODE_AUTO:
		return "auto";
	case PERFJIT_MODE_CODE_REGION:
		return "code-region";
	case PERFJIT_MODE_PERF_MAP:
		return "perf-map";
	case PERFJIT_MODE_JITDUMP:
		return "jitdump";
	default:
		return "unknown";
	}
}

} // namespace calc

#endif
