// SPDX-License-Identifier: LGPL-2.1-or-later
//
// What libperfjit reports off the runtime's thread (a side file not stored,
// the pins not made), told by the agents built on it on standard error.
#ifndef PERFJIT_AGENT_LOG_HPP
#define PERFJIT_AGENT_LOG_HPP

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "perfjit.h"

namespace perfjit::agent
{

// perfjit_options::log for an agent: each message on its own line, after
// the agent's name, at most kBurst of them per window. A full disk fails
// every store, and the runtime's own output must not fill with one
// complaint: what is dropped is counted in the window after.
class StderrLog
{
public:
	static constexpr unsigned kBurst = 5;

	explicit StderrLog(const char *prefix, FILE *out = stderr,
			   std::chrono::milliseconds window = std::chrono::minutes(1))
	    : prefix_(prefix), out_(out), window_(window)
	{
	}
	StderrLog(const StderrLog &) = delete;
	StderrLog &operator=(const StderrLog &) = delete;

	// Points @o's log at this, which must outlive the session.
	void attach(perfjit_options &o)
	{
		o.log = write;
		o.log_arg = this;
	}

	// The callback: any thread, never throws. The lock is tried, not
	// waited for: in a child that fork() made while another thread held
	// it, nobody ever releases it, and what cannot be said is counted.
	static void write(void *arg, int level, const char *message) noexcept
	{
		auto *self = static_cast<StderrLog *>(arg);

		for (int i = 0; i < 1000; i++) {
			if (self->lock_.try_lock()) {
				std::lock_guard<std::mutex> guard(self->lock_, std::adopt_lock);

				try {
					self->say(level, message);
				} catch (...) {
				}
				return;
			}
			std::this_thread::yield();
		}
		self->missed_.fetch_add(1, std::memory_order_relaxed);
	}

private:
	void say(int level, const char *message)
	{
		const auto now = std::chrono::steady_clock::now();

		dropped_ += missed_.exchange(0, std::memory_order_relaxed);
		if (!said_ || now - start_ >= window_) {
			if (dropped_)
				fprintf(out_, "%s: %lu more messages from libperfjit not shown\n",
					prefix_, dropped_);
			start_ = now;
			said_ = 0;
			dropped_ = 0;
		}
		if (said_ == kBurst) {
			// Said when it starts: a process that ends within the
			// window never gets to the count.
			if (!dropped_++)
				fprintf(out_,
					"%s: more messages from libperfjit this minute: counted, "
					"not shown\n",
					prefix_);
			return;
		}
		said_++;
		fprintf(out_, "%s: %s: %s\n", prefix_,
			level == PERFJIT_LOG_ERROR ? "error" : "warning", message);
		fflush(out_);
	}

	const char *prefix_;
	FILE *out_;
	const std::chrono::milliseconds window_;
	std::mutex lock_;
	std::chrono::steady_clock::time_point start_{};
	unsigned said_ = 0;
	unsigned long dropped_ = 0;
	std::atomic<unsigned long> missed_{0}; // could not take the lock
};

} // namespace perfjit::agent

#endif
