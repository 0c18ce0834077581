// SPDX-License-Identifier: LGPL-2.1-or-later
// The session behind the C API: mode selection, announcements, the table of
// live code, rundowns for late recorders, fork safety.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <linux/perf_event.h>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <poll.h>
#include <pthread.h>
#include <set>
#include <string>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "fallback.hpp"
#include "perfjit.h"
#include "side_file.hpp"
#include "uapi.hpp"
#include "util.hpp"

namespace
{

using namespace perfjit;

// An open pack takes single loads up to this many functions or bytes of
// code, and once a recorder asked, for at most kPackDelay after the first.
constexpr size_t kPackFunctions = 1024;
constexpr size_t kPackBytes = 4 << 20;
constexpr std::chrono::milliseconds kPackDelay{100};

// Bumped in every child after fork(): a session compares it with the value
// it saw last to notice that it now lives in a child.
std::atomic<unsigned> g_fork_generation{0};
// The library's one pthread_atfork() registration, at its first
// perfjit_open(): fork_prepare(), fork_parent(), fork_child().
std::once_flag g_atfork_once;

std::string home_dir(const char *sub)
{
	const char *home = getenv("HOME");

	return std::string(home && home[0] ? home : "/tmp") + sub;
}

// The directory the options name, else the one $@env names, else
// $HOME@home_sub.
std::string choose_dir(const char *option, const char *env, const char *home_sub)
{
	const char *value = getenv(env);

	if (option)
		return option;
	if (value && value[0])
		return value;
	return home_dir(home_sub);
}

// The name of a region that covers @count functions, the first named @first:
// short enough for the kernel.
std::string run_name(const std::string &first, size_t count)
{
	if (count == 1)
		return first;
	const std::string more = " and " + std::to_string(count - 1) + " more";
	const size_t room = uapi::PERF_CODE_REGION_NAME_MAX - 1 - more.size();

	return first.substr(0, room) + more;
}

// The code of one or more functions announced together, which share a side
// file: one file to write, and for perf to open, per batch.
//
// Single loads share an open pack: a file that takes each next function
// until it is full or, once queued, its delay has passed. Its build-id is
// unique_build_id(), known before its content, so that each function is
// announced as it loads; its layout only appends.
//
// Once stored and pinned (Pins), the file is the copy: the pack is freed
// but for the names (released), and the pin keeps the file from every
// bound while its code is live. A file that could not be pinned keeps its
// pack, to be stored again if a bound removes it.
struct SideFile {
	Pack pack;
	std::vector<std::string> names; // of the pack's functions, once released
	std::vector<uint64_t> offsets;	// of each function's code: the regions' pgoff
	BuildId id{};
	Pins *pins = nullptr;	// the session's, which outlive it
	bool laid_out = false;	// offsets and id computed
	bool stored = false;	// written to the build-id cache
	bool pinned = false;	// holds a pin of id in *pins
	bool released = false;	// the pack freed: only refreshed from here on
	bool lost = false;	// released, then removed with its pin: told once
	bool queued = false;	// in perfjit_session::pending
	bool open = false;	// an open pack: takes more functions
	int store_err = 0;	// why the library's thread could not store it
	unsigned refreshed = 0; // the rundown that last refreshed the stored file
	size_t code_bytes = 0;	// an open pack's code, to bound it
	// An open pack that is queued: written by then, full or not.
	std::chrono::steady_clock::time_point due{};

	explicit SideFile(Pins *p) : pins(p) {}
	SideFile(const SideFile &) = delete;
	SideFile &operator=(const SideFile &) = delete;
	// Its last region went: nothing keeps the file from a bound now.
	~SideFile()
	{
		if (pinned)
			pins->unpin(id);
	}

	static std::shared_ptr<SideFile> open_pack(Pins *pins)
	{
		auto f = std::make_shared<SideFile>(pins);

		f->id = unique_build_id();
		f->laid_out = true;
		f->open = true;
		return f;
	}
	// Frees the pack: what is left is what a rundown announces.
	void release()
	{
		names.reserve(pack.size());
		for (CodeImage &image : pack)
			names.push_back(std::move(image.name));
		Pack().swap(pack);
		released = true;
	}
	const std::string &name(size_t i) const { return released ? names[i] : pack[i].name; }
	// Appends @image to an open pack; its offset is known at once.
	size_t append(CodeImage image)
	{
		code_bytes += image.code.size();
		pack.push_back(std::move(image));
		offsets.push_back(pack_next_offset(pack, offsets));
		return pack.size() - 1;
	}

	// The layout and build-id, computed when first needed: a load that
	// nobody records costs neither the layout nor the hash.
	SideFile &laid()
	{
		if (!laid_out) {
			offsets = pack_layout(pack);
			id = build_id_of(pack);
			laid_out = true;
		}
		return *this;
	}
};

// One live function: what a rundown announces of it, with its name in its
// file. Its code, lines and tables are in the file's pack until the file
// is stored.
struct Region {
	std::shared_ptr<SideFile> file;
	size_t index = 0; // in file->offsets, and file->pack while it is kept
	uint64_t jitdump_index = 0;
	uint64_t len = 0;
	uint64_t loaded_at = 0; // the address it was loaded at: its place in the pack

	const CodeImage &image() const { return file->pack[index]; }
	const std::string &name() const { return file->name(index); }
};

// Whether @next follows @prev where they were loaded, close enough to share
// one region (adjacent()).
bool follows(const Region &prev, const Region &next)
{
	return adjacent(prev.loaded_at, prev.len, next.loaded_at);
}

} // namespace

struct perfjit_session {
	std::mutex lock;
	int mode = PERFJIT_MODE_CODE_REGION;
	bool own_thread = true; // rundowns from the library's thread
	std::string buildid_dir;
	std::string jitdump_dir;
	unsigned fork_generation = 0;
	// Before the side files that name it: they unpin as they go.
	Pins pins;
	bool pins_failed = false; // told to the log once
	std::map<uint64_t, Region> regions;
	// A recorder asked for this process's code: from the first rundown on,
	// loads and unloads are announced and side files stored. Before it, a
	// load makes no system call.
	bool asked = false;
	// Mapped when first asked: where a recorder finds the side files.
	DirMarker marker;
	DirCache dirs;
	// Side files that recorders need, for the library's thread to store:
	// a load does not wait for a file write. Taken by flush_pending().
	std::vector<std::shared_ptr<SideFile>> pending;
	// The pack that single loads go to, with the library's thread.
	std::shared_ptr<SideFile> open_pack;
	// Held while pending files are written, outside the session's lock.
	std::mutex flush_lock;
	DirCache flush_dirs; // under flush_lock
	// Keeps buildid_dir's side files under perfjit_options::max_dir_bytes:
	// pruned under flush_lock, outside the session's lock.
	DirBound bound;
	unsigned rundowns = 0; // started, for SideFile::refreshed
	// perfjit_options::on_asked, called after each rundown.
	void (*on_asked)(void *) = nullptr;
	void *on_asked_arg = nullptr;
	Log log; // perfjit_options::log
	PerfMap perf_map;
	Jitdump jitdump;

	int open(const perfjit_options &opts);
	int reopen_after_fork();
	int open_fallback(int which);
	int announce_span(uint64_t addr, uint64_t len, uint64_t pgoff, const std::string &name,
			  const SideFile &file, uint32_t flags);
	int announce(uint64_t addr, const Region &r, bool unload);
	int store(SideFile &file);
	int store_file(const Pack &pack, const BuildId &id, DirCache &cache, bool *pinned);
	int refresh_file(const BuildId &id, bool &pinned);
	int put(const SideFile &file, bool released, DirCache &cache, bool &pinned);
	void settle(SideFile &file, int err, bool pinned);
	int store_soon(const std::shared_ptr<SideFile> &file);
	int refresh_soon(const std::shared_ptr<SideFile> &file);
	int flush_pending(bool all = true, std::chrono::steady_clock::time_point *next = nullptr);
	void prune_if_due();
	void seal(SideFile &file);
	void seal_open_pack();
	int rundown_from(uint64_t &addr);
	int rundown();
	size_t run_length(const std::vector<Region> &batch, size_t i) const;
	int announce_load(const std::vector<Region> &batch, size_t first, size_t count);
	int load(const perfjit_code *const *codes, size_t n);
	int unload(uint64_t addr);
	int move(uint64_t from, uint64_t to);
	int check_fork();
	void mark_asked();
};

namespace
{

// Whether the kernel has prctl(PR_PERF_CODE_REGION): announcing NULL is
// -EFAULT where it does, -EINVAL where it does not. No perf event is needed,
// so this holds at every perf_event_paranoid level.
bool has_code_region_prctl()
{
	return prctl(uapi::PR_PERF_CODE_REGION, uapi::PR_PERF_CODE_REGION_ANNOUNCE, 0UL, 0UL, 0UL) <
		       0 &&
	       errno == EFAULT;
}

// The process's registration for "a recorder asks for a rundown": one eventfd
// per process (the kernel keeps one), shared by its code-region sessions,
// and a thread that runs their rundowns when it becomes readable. A process
// either has the thread or not: its sessions are all opened with
// PERFJIT_OPEN_NO_THREAD, or none is, so that one consumer drains the
// eventfd.
//
// Locks: lock_, then a session's lock. The thread holds lock_ only to pick
// the sessions and to say which one it runs down (current_); it runs the
// rundown without lock_, so that open, close and fork() do not wait for
// it, and detach() waits until the thread is done with the session.
class Notifier
{
public:
	static Notifier &get()
	{
		// Never destroyed: its thread may run while static objects die.
		static Notifier &n = *new Notifier;
		return n;
	}
	// The notifier if one was made: what fork() has to take care of.
	static Notifier *existing() { return made_.load(std::memory_order_acquire); }
	// The library's fork handlers (fork_prepare() and the others).
	void prepare();
	void parent();
	void child();

	int attach(perfjit_session *s, bool thread);
	void detach(perfjit_session *s);
	int fd()
	{
		std::lock_guard<std::mutex> guard(lock_);
		return event_ ? event_.get() : -ENODEV;
	}
	// Clears the eventfd, unless the thread consumes it.
	void drain_for_runtime()
	{
		std::lock_guard<std::mutex> guard(lock_);

		if (!worker_)
			drain_locked();
	}
	// In a child after fork(): its own eventfd and thread, never the parent's.
	int check_fork();
	// Asks the thread to store the sessions' pending side files. Lock-free:
	// the caller holds a session's lock.
	void wake_writer()
	{
		const uint64_t one = 1;
		const int fd = work_.load(std::memory_order_acquire);

		if (fd >= 0)
			(void)!write(fd, &one, sizeof(one));
	}
	// Whether the thread runs, and so stores side files for the sessions.
	// Lock-free too.
	bool has_writer() const
	{
		return writer_.load(std::memory_order_acquire) &&
		       work_.load(std::memory_order_relaxed) >= 0;
	}

private:
	// One thread's own state: it outlives a replacement of the thread.
	struct Worker {
		UniqueFd stop;
		std::atomic<bool> quit{false};
		pthread_t thread{};
	};

	Notifier()
	{
		work_.store(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
		// exit() without perfjit_close(): the pending side files are
		// stored all the same. (The library is linked -z nodelete, so
		// no dlclose() unmaps the handler or the thread's code.)
		atexit(flush_at_exit);
		made_.store(this, std::memory_order_release);
	}
	static void flush_at_exit();
	static std::atomic<Notifier *> made_;
	void drain_locked()
	{
		uint64_t n;

		if (event_)
			(void)!read(event_.get(), &n, sizeof(n));
	}
	int start_locked();
	void run(const std::shared_ptr<Worker> &w) noexcept;
	// Runs @fn(s) for each session, marked current_, without lock_.
	template <typename Fn>
	bool for_each_session(const std::shared_ptr<Worker> &w, Fn &&fn);

	std::mutex lock_;
	std::condition_variable idle_;
	std::set<perfjit_session *> sessions_;
	perfjit_session *current_ = nullptr; // run down by the thread now
	int threaded_ = -1;		     // whether the sessions want the thread; -1: no session
	UniqueFd event_;
	std::shared_ptr<Worker> worker_;
	std::atomic<bool> forked_{false};
	// Signalled when a session has pending side files. Never closed but
	// in a child, which replaces it under lock_ before any of its calls
	// can load.
	std::atomic<int> work_{-1};
	std::atomic<bool> writer_{false}; // worker_ is set
};

int Notifier::start_locked()
{
	if (!event_) {
		UniqueFd efd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));

		if (!efd)
			return -errno;
		if (prctl(uapi::PR_PERF_CODE_REGION, uapi::PR_PERF_CODE_REGION_REGISTER,
			  static_cast<unsigned long>(efd.get()), 0UL, 0UL))
			return -errno;
		event_ = std::move(efd);
	}
	if (threaded_ == 1 && !worker_) {
		auto w = std::make_shared<Worker>();

		w->stop.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
		if (!w->stop)
			return -errno;
		// The thread owns a reference to its state until it returns.
		auto arg = std::make_unique<std::shared_ptr<Worker>>(w);
		// The runtime's signals go to the runtime's threads, not to this one.
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		const int err = pthread_create(
			&w->thread, nullptr,
			[](void *p) -> void * {
				std::unique_ptr<std::shared_ptr<Worker>> own(
					static_cast<std::shared_ptr<Worker> *>(p));
				Notifier::get().run(*own);
				return nullptr;
			},
			arg.get());
		pthread_sigmask(SIG_SETMASK, &old, nullptr);
		if (err)
			return -err;
		arg.release(); // the thread's now
		worker_ = std::move(w);
		writer_.store(true);
	}
	return 0;
}

int Notifier::attach(perfjit_session *s, bool thread)
{
	std::lock_guard<std::mutex> guard(lock_);

	if (threaded_ >= 0 && threaded_ != static_cast<int>(thread))
		return -EINVAL;
	sessions_.insert(s);
	threaded_ = thread;
	const int err = start_locked();
	if (err) {
		sessions_.erase(s);
		if (sessions_.empty())
			threaded_ = -1;
		return err;
	}
	// A recorder asked already (perf record -- runtime: the kernel
	// signals a registration at once when an event that watches the
	// task asked): the new session announces from its first load. Left
	// to the rundown, code loaded before it would have no name from the
	// mapping record of its memory, made after the recording began, to
	// the rundown's record. The eventfd stays for the thread (or the
	// runtime) to read: other sessions' code needs the rundown.
	struct pollfd pfd = {event_.get(), POLLIN, 0};
	if (poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN)) {
		std::lock_guard<std::mutex> session_guard(s->lock);

		s->mark_asked();
	}
	return 0;
}

void Notifier::detach(perfjit_session *s)
{
	std::shared_ptr<Worker> stopped;
	{
		std::unique_lock<std::mutex> guard(lock_);

		if (!sessions_.erase(s))
			return;
		// The thread may be running this session down: wait for it.
		idle_.wait(guard, [&] { return current_ != s; });
		if (!sessions_.empty())
			return;
		threaded_ = -1;
		prctl(uapi::PR_PERF_CODE_REGION, uapi::PR_PERF_CODE_REGION_REGISTER, -1L, 0UL, 0UL);
		event_.reset();
		stopped = std::move(worker_);
		writer_.store(false);
	}
	if (stopped) {
		uint64_t one = 1;

		stopped->quit = true;
		(void)!write(stopped->stop.get(), &one, sizeof(one));
		if (pthread_equal(stopped->thread, pthread_self()))
			pthread_detach(stopped->thread);
		else
			pthread_join(stopped->thread, nullptr);
	}
}

int Notifier::check_fork()
{
	// Cheap: every call of the API comes here, also during a rundown.
	if (!forked_.load(std::memory_order_relaxed))
		return 0;
	std::lock_guard<std::mutex> guard(lock_);
	if (!forked_.load())
		return 0;
	// The eventfd is the parent's, and so is the kernel's registration of
	// it: the child registers one of its own. Until that works, it tries
	// again on the next call. So is the writer's: the parent's thread
	// reads it.
	event_.reset();
	const int work = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (work < 0)
		return -errno;
	const int old = work_.exchange(work);
	if (old >= 0)
		close(old);
	const int err = sessions_.empty() ? 0 : start_locked();
	if (!err)
		forked_.store(false);
	return err;
}

template <typename Fn>
bool Notifier::for_each_session(const std::shared_ptr<Worker> &w, Fn &&fn)
{
	std::vector<perfjit_session *> todo;
	{
		std::lock_guard<std::mutex> guard(lock_);

		if (w->quit)
			return false;
		todo.assign(sessions_.begin(), sessions_.end());
	}
	for (perfjit_session *s : todo) {
		{
			std::lock_guard<std::mutex> guard(lock_);

			// Closed meanwhile: detach() erased it.
			if (w->quit || !sessions_.count(s))
				continue;
			current_ = s;
		}
		try {
			fn(s);
		} catch (const std::exception &e) {
			// Out of memory, say: the next request tries again.
			try {
				s->log(PERFJIT_LOG_ERROR,
				       std::string("the library's thread: ") + e.what());
			} catch (...) {
			}
		} catch (...) {
		}
		std::lock_guard<std::mutex> guard(lock_);
		current_ = nullptr;
		idle_.notify_all();
	}
	return true;
}

void Notifier::run(const std::shared_ptr<Worker> &w) noexcept
{
	// However the loop ends, loads store their side files themselves from
	// then on.
	struct Done {
		Notifier &n;
		const std::shared_ptr<Worker> &w;
		~Done()
		{
			try {
				std::lock_guard<std::mutex> guard(n.lock_);

				if (n.worker_ == w)
					n.writer_.store(false);
			} catch (...) {
			}
		}
	} done{*this, w};

	try {
		// When the earliest open pack queued is due; none is: zero.
		using Clock = std::chrono::steady_clock;
		Clock::time_point due{};

		while (!w->quit) {
			struct pollfd fds[3] = {};
			int timeout = -1;
			{
				std::lock_guard<std::mutex> guard(lock_);

				if (w->quit || !event_)
					return;
				fds[0] = {event_.get(), POLLIN, 0};
				fds[1] = {w->stop.get(), POLLIN, 0};
				fds[2] = {work_.load(), POLLIN, 0};
			}
			if (due != Clock::time_point{}) {
				const auto left = std::chrono::ceil<std::chrono::milliseconds>(
					due - Clock::now());

				timeout = static_cast<int>(std::max<int64_t>(left.count(), 0));
			}
			const int ready = poll(fds, 3, timeout);
			if (ready < 0) {
				if (errno == EINTR)
					continue;
				return;
			}
			if (fds[1].revents || w->quit)
				return;
			if ((fds[2].revents & POLLIN) || (due != Clock::time_point{} && !ready)) {
				uint64_t n;

				if (fds[2].revents & POLLIN)
					(void)!read(fds[2].fd, &n, sizeof(n));
				// Stores a burst of loads' files together, each
				// write outside the session's lock; open packs
				// when they are due.
				due = Clock::time_point{};
				if (!for_each_session(w, [&due](perfjit_session *s) {
					    Clock::time_point next{};

					    s->flush_pending(false, &next);
					    if (next != Clock::time_point{} &&
						(due == Clock::time_point{} || next < due))
						    due = next;
				    }))
					return;
			}
			if (!(fds[0].revents & POLLIN))
				continue;
			{
				std::lock_guard<std::mutex> guard(lock_);

				if (w->quit)
					return;
				drain_locked();
			}
			if (!for_each_session(w, [](perfjit_session *s) {
				    const int err = s->rundown();

				    if (err)
					    s->log(PERFJIT_LOG_ERROR,
						   std::string(
							   "a rundown that a recorder asked for "
							   "was not complete: ") +
							   perfjit_strerror(err));
			    }))
				return;
		}
	} catch (...) {
		// A lock failed: no more rundowns from this thread.
	}
}

std::atomic<Notifier *> Notifier::made_{nullptr};

// fork() waits for the library's locks that guard its state, so that the
// child has them free: lock_, then every session's lock. Not for the side
// files being written (flush_lock): the parent's thread goes on writing
// them after the fork, and the child, which has no such thread, leaves
// what its parent announced to it (perfjit_session::check_fork()).
void Notifier::prepare()
{
	lock_.lock();
	for (perfjit_session *s : sessions_) {
		s->lock.lock();
		// Parent and child would fill it apart, under one build-id.
		s->seal_open_pack();
		// Held for a system call at a time, by the writer too.
		s->pins.before_fork();
	}
}

void Notifier::parent()
{
	for (perfjit_session *s : sessions_) {
		s->pins.after_fork_in_parent();
		s->lock.unlock();
	}
	lock_.unlock();
}

void Notifier::child()
{
	for (perfjit_session *s : sessions_) {
		s->lock.unlock();
		// The parent's thread may have held it, writing: nobody in
		// the child does. What it guards is the writer's scratch.
		new (&s->flush_lock) std::mutex;
		s->flush_dirs = DirCache{};
		s->pins.after_fork_in_child();
	}
	// The thread did not come along: forget it, never join it.
	worker_.reset();
	writer_.store(false);
	current_ = nullptr;
	forked_.store(true, std::memory_order_relaxed);
	lock_.unlock();
}

void Notifier::flush_at_exit()
{
	Notifier &n = get();

	try {
		std::unique_lock<std::mutex> guard(n.lock_);

		// A rundown that runs now goes on announcing and queueing its
		// files: the thread takes no further session, and the one it
		// runs down ends before the queues are flushed.
		if (n.worker_)
			n.worker_->quit = true;
		n.idle_.wait(guard, [&n] { return !n.current_; });
		for (perfjit_session *s : n.sessions_) {
			s->flush_pending();
			// The process's code ends with it: its pins go now, not
			// at some other process's next prune.
			s->pins.close();
		}
	} catch (...) {
		// Exiting: what could not be stored is lost.
	}
}

} // namespace

int perfjit_session::open_fallback(int which)
{
	mode = which;
	if (which == PERFJIT_MODE_JITDUMP)
		return jitdump.open(jitdump_dir);
	return perf_map.open();
}

int perfjit_session::open(const perfjit_options &opts)
{
	buildid_dir = choose_dir(opts.buildid_dir, "PERF_BUILDID_DIR", "/.debug");
	jitdump_dir = choose_dir(opts.jitdump_dir, "JITDUMPDIR", "/.debug/jit");
	fork_generation = g_fork_generation.load(std::memory_order_relaxed);
	if (opts.max_dir_bytes == PERFJIT_DIR_UNBOUNDED)
		bound.set_max(0);
	else if (!opts.max_dir_bytes)
		bound.set_max(PERFJIT_DIR_DEFAULT_BYTES);
	else
		bound.set_max(std::min<uint64_t>(opts.max_dir_bytes, INT64_MAX));

	const int fallback = opts.fallback ? static_cast<int>(opts.fallback)
					   : static_cast<int>(PERFJIT_MODE_PERF_MAP);
	if (fallback != PERFJIT_MODE_PERF_MAP && fallback != PERFJIT_MODE_JITDUMP)
		return -EINVAL;

	if (opts.flags & ~PERFJIT_OPEN_NO_THREAD)
		return -EINVAL;
	own_thread = !(opts.flags & PERFJIT_OPEN_NO_THREAD);
	on_asked = opts.on_asked;
	on_asked_arg = opts.on_asked_arg;
	log = Log(opts.log, opts.log_arg);

	switch (opts.mode) {
	case PERFJIT_MODE_PERF_MAP:
	case PERFJIT_MODE_JITDUMP:
		return open_fallback(opts.mode);
	case PERFJIT_MODE_AUTO:
	case PERFJIT_MODE_CODE_REGION: {
		// PERFJIT_NO_CODE_REGION=1 pretends the kernel lacks the prctl.
		const char *no = getenv("PERFJIT_NO_CODE_REGION");
		const bool simulate_old = no && no[0] && strcmp(no, "0") != 0;

		if (!simulate_old && has_code_region_prctl()) {
			mode = PERFJIT_MODE_CODE_REGION;
			return Notifier::get().attach(this, own_thread);
		}
		if (opts.mode == PERFJIT_MODE_CODE_REGION)
			return -EOPNOTSUPP;
		return open_fallback(fallback);
	}
	default:
		return -EINVAL;
	}
}

// In a child after fork(): its own registration for rundowns and its own
// fallback files, never the parent's.
int perfjit_session::check_fork()
{
	const unsigned gen = g_fork_generation.load(std::memory_order_relaxed);

	if (gen == fork_generation)
		return 0;
	fork_generation = gen;
	// The parent's thread stores what the parent queued; the child stores
	// its own copy. What was stored and released is there, pinned by the
	// parent (Notifier::child() left the parent's pins to it), and the
	// child cannot write it again: pinned for the child now, before the
	// parent unloads the code or exits.
	for (auto &kv : regions) {
		kv.second.file->queued = false;
		kv.second.file->pinned = false;
	}
	for (auto &kv : regions) {
		SideFile &file = *kv.second.file;

		if (!file.released || file.pinned)
			continue;
		if (!pins.is_open() && pins.open(buildid_dir))
			break;
		file.pinned = !pins.pin(file.id, side_file_path(buildid_dir, file.id));
	}
	pending.clear();
	// Sealed before the fork (Notifier::prepare()): the child's next
	// single load opens a pack of its own.
	open_pack.reset();
	switch (mode) {
	case PERFJIT_MODE_CODE_REGION:
		// Nobody asked the child yet: it has a registration of its own.
		asked = false;
		return 0;
	case PERFJIT_MODE_JITDUMP:
		jitdump.close();
		return jitdump.open(jitdump_dir);
	default:
		return perf_map.open();
	}
}

int perfjit_session::announce_span(uint64_t addr, uint64_t len, uint64_t pgoff,
				   const std::string &name, const SideFile &file, uint32_t flags)
{
	uapi::perf_code_region region{};

	region.size = sizeof(region);
	region.flags = flags;
	region.addr = addr;
	region.len = len;
	region.pgoff = pgoff;
	region.name = reinterpret_cast<uintptr_t>(name.c_str());
	region.build_id_size = file.id.size();
	memcpy(region.build_id, file.id.data(), file.id.size());

	const int ret = prctl(uapi::PR_PERF_CODE_REGION, uapi::PR_PERF_CODE_REGION_ANNOUNCE,
			      reinterpret_cast<unsigned long>(&region), 0UL, 0UL);
	return ret < 0 ? -errno : 0;
}

int perfjit_session::announce(uint64_t addr, const Region &r, bool unload)
{
	const SideFile &file = r.file->laid();

	return announce_span(addr, r.len, file.offsets[r.index], r.name(), file,
			     unload ? uapi::PERF_CODE_REGION_UNLOAD : 0);
}

// Under the lock: @file takes no more functions, and is stored as it is.
void perfjit_session::seal(SideFile &file)
{
	file.open = false;
	if (open_pack.get() == &file)
		open_pack.reset();
}

void perfjit_session::seal_open_pack()
{
	if (open_pack)
		seal(*open_pack);
}

// Under the lock, without the library's thread: a file that a flush of the
// library's queue writes meanwhile is its to store.
int perfjit_session::store(SideFile &file)
{
	bool pinned = false;

	if (file.stored || file.queued)
		return 0;
	seal(file);
	const int err = store_file(file.pack, file.laid().id, dirs, &pinned);
	settle(file, err, pinned);
	return err;
}

// store_side_file() of @pack, counted for the directory's bound and pinned,
// with what failed told to the log.
int perfjit_session::store_file(const Pack &pack, const BuildId &id, DirCache &cache, bool *pinned)
{
	std::string why;
	uint64_t written = 0;
	const int err = store_side_file(buildid_dir, pack, id, &cache, &written,
					log ? &why : nullptr, &pins, pinned);

	bound.add(written);
	if (err && log) {
		const std::string more =
			pack.size() > 1 ? " and " + std::to_string(pack.size() - 1) + " more" : "";

		log(PERFJIT_LOG_ERROR, "the side file of " + pack[0].name + more +
					       " was not stored: " +
					       (why.empty() ? std::string(strerror(-err)) : why));
	}
	return err;
}

// A stored file whose pack was freed, for a rundown: made the newest for the
// directory's bound, and pinned if it is not (in a child after fork()).
// One that something removed despite its pin (rm, an older bound) is
// linked back from the pin; without one, it is lost: -ESTALE, and told to
// the log.
int perfjit_session::refresh_file(const BuildId &id, bool &pinned)
{
	const std::string path = side_file_path(buildid_dir, id);
	int err = refresh_side_file(buildid_dir, id);

	if (err && pinned && !pins.restore(id))
		err = refresh_side_file(buildid_dir, id);
	if (!err) {
		if (!pinned)
			pinned = !pins.pin(id, path);
		return 0;
	}
	log(PERFJIT_LOG_WARNING, "side file " + path +
					 " is missing or not whole while its code is live: perf "
					 "names the code but cannot annotate or unwind it");
	return -ESTALE;
}

// Stores @file with its pack, or refreshes it once @released; outside the
// lock when @file is queued (nothing else writes or frees it then), else
// under it. @pinned: whether the file holds a pin, before and after.
int perfjit_session::put(const SideFile &file, bool released, DirCache &cache, bool &pinned)
{
	if (released)
		return refresh_file(file.id, pinned);
	return store_file(file.pack, file.id, cache, &pinned);
}

// Under the lock: what put() or store() did. A file that is stored and
// pinned needs its pack no more.
void perfjit_session::settle(SideFile &file, int err, bool pinned)
{
	if (err == -ESTALE)
		file.lost = true;
	if (err) {
		if (!file.stored)
			file.store_err = err;
		return;
	}
	file.stored = true;
	file.pinned = pinned;
	if (pinned && !file.released)
		file.release();
}

// Under the lock: a recorder asked, so loads are announced from now on. The
// side-file directory's marker comes first, so that a recorder that runs as
// another user or in another mount namespace finds it with the first record.
// Without it, such a recorder names the regions but reads no side file.
void perfjit_session::mark_asked()
{
	std::string why;

	asked = true;
	marker.map(buildid_dir);
	if (!pins.is_open() && pins.open(buildid_dir, &why) && !pins_failed) {
		pins_failed = true;
		log(PERFJIT_LOG_WARNING,
		    "side files not pinned, and their code kept in memory: " + why);
	}
}

// Under the lock: has @file stored for the recorders that took its
// announcement. With the library's thread, that thread stores it (and the
// other files pending then) without the session's lock, so a load costs
// the announcement and not a file write; perfjit_side_file() and
// perfjit_close() wait for it, and so does exit(). Without the thread,
// stores it now.
int perfjit_session::store_soon(const std::shared_ptr<SideFile> &file)
{
	if (file->stored || file->queued)
		return 0;
	if (!own_thread || !Notifier::get().has_writer())
		return store(*file);
	pending.push_back(file);
	file->queued = true;
	file->store_err = 0;
	// An open pack waits for more loads, up to kPackDelay: the thread
	// wakes for it when it is due, or full.
	if (file->open)
		file->due = std::chrono::steady_clock::now() + kPackDelay;
	if (pending.size() == 1 || !file->open)
		Notifier::get().wake_writer();
	return 0;
}

// Stores the pending side files, writing them without the session's lock.
// Returns the first error; a file that failed is not stored (a rundown
// tries it again).
int perfjit_session::flush_pending(bool all, std::chrono::steady_clock::time_point *next)
{
	std::lock_guard<std::mutex> flushing(flush_lock);
	std::vector<std::shared_ptr<SideFile>> todo;
	// Of todo, when taken: whether released (refreshed only) and pinned.
	std::vector<bool> released, pinned;
	{
		std::lock_guard<std::mutex> guard(lock);
		const auto now = std::chrono::steady_clock::now();
		std::vector<std::shared_ptr<SideFile>> later;

		// An open pack that is not due stays open and queued; the rest
		// is sealed, and immutable from here on.
		for (auto &file : pending) {
			if (file->open && !all && now < file->due) {
				if (next && (*next == std::chrono::steady_clock::time_point{} ||
					     file->due < *next))
					*next = file->due;
				later.push_back(std::move(file));
				continue;
			}
			seal(*file);
			released.push_back(file->released);
			pinned.push_back(file->pinned);
			todo.push_back(std::move(file));
		}
		pending.swap(later);
	}
	int first_err = 0;
	std::vector<int> errs(todo.size(), -EIO);
	try {
		for (size_t i = 0; i < todo.size(); i++) {
			// Immutable once queued but for the flags, which are the
			// lock's: nothing else stores or frees a queued file.
			bool now = pinned[i];

			errs[i] = put(*todo[i], released[i], flush_dirs, now);
			pinned[i] = now;
			if (errs[i] && !first_err)
				first_err = errs[i];
		}
	} catch (const std::bad_alloc &) {
		first_err = -ENOMEM;
	} catch (const std::exception &e) {
		first_err = -EIO;
		try {
			log(PERFJIT_LOG_ERROR, std::string("side files not stored: ") + e.what());
		} catch (...) {
		}
	} catch (...) {
		first_err = -EIO;
	}
	{
		std::lock_guard<std::mutex> guard(lock);
		for (size_t i = 0; i < todo.size(); i++) {
			todo[i]->queued = false;
			settle(*todo[i], errs[i], pinned[i]);
		}
	}
	// The files of code unloaded meanwhile go now, and their pins with
	// them: the prune may take them.
	todo.clear();
	prune_if_due();
	return first_err;
}

// Under flush_lock, not the session's lock: when what this session wrote
// reaches the directory's bound, removes the oldest side files but for
// those of its live regions. The directory is read without the session's
// lock, so loads go on meanwhile; the live regions are taken after that,
// and a file stored again or refreshed since it was read stays.
void perfjit_session::prune_if_due()
{
	if (!bound.due())
		return;
	bound.prune(buildid_dir, [this] {
		std::vector<BuildId> keep;
		{
			std::lock_guard<std::mutex> guard(lock);
			const SideFile *last = nullptr;

			for (const auto &kv : regions) {
				const SideFile *file = kv.second.file.get();

				// A file without its build-id yet was never stored.
				if (file != last && file->laid_out)
					keep.push_back(file->id);
				last = file;
			}
		}
		std::sort(keep.begin(), keep.end());
		keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
		return keep;
	});
}

// One step of a rundown, under the lock: announces again the live code at
// or after @addr (a run of adjacent code that shares a side file as one
// region) and has its side file stored, then moves @addr past it. Returns
// 0, -ENOENT at the end, or the error of this run. With the library's
// thread the stores are queued for it, as a load's are: the recorder that
// asked gets every region first, and a rundown of 10,000 one-function files
// does not take 10,000 file writes to reach its last region.
int perfjit_session::rundown_from(uint64_t &addr)
{
	auto first = regions.lower_bound(addr);

	if (first == regions.end())
		return -ENOENT;
	auto last = first, next = first;
	size_t count = 1;
	for (++next; next != regions.end(); ++next, ++last, ++count) {
		const Region &a = last->second, &b = next->second;

		// Next to each other in the file, and where they were loaded
		// still (perfjit_move() changes the address only).
		if (b.file != first->second.file || !follows(a, b) ||
		    next->first - last->first != b.loaded_at - a.loaded_at)
			break;
	}
	const Region &r = first->second;
	const uint64_t end = last->first + last->second.len;
	constexpr uint32_t flags = uapi::PERF_CODE_REGION_RUNDOWN;
	r.file->laid();
	int err = announce_span(first->first, end - first->first, r.file->offsets[r.index],
				run_name(r.name(), count), *r.file, flags);
	// Not one executable mapping, say: then each on its own.
	for (auto it = first; err == -EINVAL && count > 1; ++it) {
		err = announce_span(it->first, it->second.len, r.file->offsets[it->second.index],
				    it->second.name(), *it->second.file, flags);
		if (it == last)
			break;
	}
	if (!err)
		err = r.file->stored ? refresh_soon(r.file) : store_soon(r.file);
	addr = last->first + 1;
	return err;
}

// Under the lock, in a rundown: once per rundown, put() of a stored file
// that the recorder needs (refreshed, or stored again from its pack if it
// could not be pinned); with the library's thread, that thread does,
// outside the lock, as it stores files.
int perfjit_session::refresh_soon(const std::shared_ptr<SideFile> &file)
{
	if (file->refreshed == rundowns || file->queued || file->lost)
		return 0;
	file->refreshed = rundowns;
	if (own_thread && Notifier::get().has_writer()) {
		pending.push_back(file);
		file->queued = true;
		if (pending.size() == 1)
			Notifier::get().wake_writer();
		return 0;
	}
	bool pinned = file->pinned;
	const int err = put(*file, file->released, dirs, pinned);

	settle(*file, err, pinned);
	return err;
}

// Announces all live code again, marked PERF_CODE_REGION_RUNDOWN, because a
// recorder asked: the kernel signalled the registration. The lock is taken
// per region, not for the whole rundown: the runtime goes on loading and
// unloading meanwhile, and each region is announced in order with those.
// From the first rundown on, each load and unload is announced as well:
// set under the lock before the first region, so that a load either is in
// the map the rundown walks or announces itself.
//
// A recorder whose buffer could not take the whole rundown sees it lost
// (PERF_RECORD_LOST) and asks again: the library does not wait for it.
// Then perfjit_options::on_asked, without the lock: a runtime that reports
// nothing until asked starts with the code it has.
int perfjit_session::rundown()
{
	uint64_t addr = 0;
	int err = 0;

	for (bool first = true;; first = false) {
		int ret;
		{
			std::lock_guard<std::mutex> guard(lock);

			if (mode != PERFJIT_MODE_CODE_REGION)
				return 0;
			if (first) {
				// The library's thread of a child may run it
				// before the runtime's first call there.
				const int ferr = check_fork();

				if (ferr)
					return ferr;
				rundowns++;
				mark_asked();
				// What a recorder asks for is written now.
				seal_open_pack();
			}
			ret = rundown_from(addr);
		}
		if (ret == -ENOENT)
			break;
		// This run only: the rest is announced still.
		if (ret < 0 && !err)
			err = ret;
	}
	// Not from a rundown that the callback itself runs: the runtime's
	// answer to it may be perfjit_rundown().
	static thread_local bool in_on_asked = false;
	if (on_asked && !in_on_asked) {
		struct Flag {
			bool &f;
			explicit Flag(bool &flag) : f(flag) { f = true; }
			~Flag() { f = false; }
		} inside(in_on_asked);

		on_asked(on_asked_arg);
	}
	return err;
}

// Announces batch[first, first + count), adjacent code that shares a side
// file, as one region (count > 1) or each on its own, and has the side file
// stored. Until a recorder asks for the process's code, nothing: the
// rundown it asks for announces and stores what is live then.
int perfjit_session::announce_load(const std::vector<Region> &batch, size_t first, size_t count)
{
	const Region &r = batch[first];
	int err;

	if (count > 1) {
		const Region &b = batch[first + count - 1];

		r.file->laid();
		err = announce_span(r.loaded_at, b.loaded_at + b.len - r.loaded_at,
				    r.file->offsets[r.index], run_name(r.name(), count), *r.file,
				    0);
		// Not one executable mapping, say: then each on its own.
		for (size_t i = first; err == -EINVAL && i < first + count; i++)
			err = announce(batch[i].loaded_at, batch[i], false);
	} else {
		err = announce(r.loaded_at, r, false);
	}
	return err ? err : store_soon(r.file);
}

// How many of batch[i...] one region can cover: they share a side file,
// follow each other in memory, and no other code lies between them.
size_t perfjit_session::run_length(const std::vector<Region> &batch, size_t i) const
{
	size_t n = 1;

	for (; i + n < batch.size(); n++) {
		const Region &prev = batch[i + n - 1], &next = batch[i + n];
		auto other = regions.lower_bound(prev.loaded_at);

		if (prev.file != next.file || !follows(prev, next) ||
		    (other != regions.end() && other->first < next.loaded_at))
			break;
	}
	return n;
}

// While nobody has asked for the process's code, a load is what it costs
// to keep the code for a later rundown: a copy and a map entry, and no
// system call, hash or temporary beyond the batch itself.
int perfjit_session::load(const perfjit_code *const *codes, size_t n)
{
	if (!codes || !n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!codes[i])
			return -EINVAL;
	}
	// In address order: the order of a batch means nothing, and adjacent
	// code can then share a region. A batch in order already (one
	// function, or a JIT's module) is taken as it is.
	const auto by_addr = [](const perfjit_code *a, const perfjit_code *b) {
		return std::less<const void *>{}(a->addr, b->addr);
	};
	std::vector<const perfjit_code *> reordered;
	const perfjit_code *const *sorted = codes;
	if (!std::is_sorted(codes, codes + n, by_addr)) {
		reordered.assign(codes, codes + n);
		std::sort(reordered.begin(), reordered.end(), by_addr);
		sorted = reordered.data();
	}

	// With code regions the batch shares one side file, but for code whose
	// unwind table cannot move: that gets a file of its own. A single
	// load goes to the open pack, where the library's thread writes it
	// with the loads that follow it.
	const bool code_region = mode == PERFJIT_MODE_CODE_REGION;
	const bool to_pack = code_region && n == 1 && own_thread && Notifier::get().has_writer();
	std::vector<Region> batch(n);
	std::shared_ptr<SideFile> shared;
	for (size_t i = 0; i < n; i++) {
		CodeImage image;
		int err = CodeImage::from(*sorted[i], image);

		if (err)
			return err;
		if (image.name.size() >= uapi::PERF_CODE_REGION_NAME_MAX)
			return -ENAMETOOLONG;
		if (regions.count(image.addr) || (i && image.addr == batch[i - 1].loaded_at))
			return -EEXIST;
		Region &r = batch[i];
		r.len = image.code.size();
		r.loaded_at = image.addr;
		if (to_pack && eh_frame_relocatable(image)) {
			if (open_pack && (open_pack->pack.size() >= kPackFunctions ||
					  open_pack->code_bytes + image.code.size() > kPackBytes))
				seal_open_pack();
			if (!open_pack)
				open_pack = SideFile::open_pack(&pins);
			r.file = open_pack;
			r.index = r.file->append(std::move(image));
			continue;
		}
		if (code_region && eh_frame_relocatable(image)) {
			if (!shared)
				shared = std::make_shared<SideFile>(&pins);
			r.file = shared;
		} else {
			r.file = std::make_shared<SideFile>(&pins);
		}
		r.index = r.file->pack.size();
		r.file->pack.push_back(std::move(image));
	}
	// The layout and build-id wait for a recorder: SideFile::laid().

	size_t announced = 0;
	int err = 0;
	while (announced < n && !err) {
		Region &r = batch[announced];
		size_t count = 1;

		switch (mode) {
		case PERFJIT_MODE_PERF_MAP:
			err = perf_map.load(r.loaded_at, r.len, r.name());
			break;
		case PERFJIT_MODE_JITDUMP:
			err = jitdump.load(r.loaded_at, r.image(), r.jitdump_index);
			break;
		default:
			if (!asked) {
				count = n - announced;
				break;
			}
			count = run_length(batch, announced);
			err = announce_load(batch, announced, count);
			break;
		}
		announced += count;
	}
	if (err) {
		// Take back what was announced: the batch loads as a whole or
		// not at all. A fallback file keeps its lines: it has no unload.
		for (size_t i = 0; code_region && asked && i < announced; i++)
			announce(batch[i].loaded_at, batch[i], true);
		return err;
	}
	for (auto &r : batch) {
		// A fallback file has all it needs of the code now.
		const uint64_t addr = r.loaded_at;

		if (!code_region)
			r.file->release();
		regions.emplace(addr, std::move(r));
	}
	return 0;
}

int perfjit_session::unload(uint64_t addr)
{
	auto it = regions.find(addr);

	if (it == regions.end())
		return -ENOENT;
	if (mode == PERFJIT_MODE_CODE_REGION && asked) {
		const int err = announce(addr, it->second, true);

		if (err)
			return err;
	}
	// perf-PID.map cannot express an unload; jitdump has no record for it.
	regions.erase(it);
	return 0;
}

int perfjit_session::move(uint64_t from, uint64_t to)
{
	auto it = regions.find(from);

	if (it == regions.end())
		return -ENOENT;
	if (regions.count(to))
		return -EEXIST;

	Region r = it->second;
	int err = 0;
	switch (mode) {
	case PERFJIT_MODE_PERF_MAP:
		err = perf_map.load(to, r.len, r.name());
		break;
	case PERFJIT_MODE_JITDUMP:
		err = jitdump.move(from, to, r.len, r.jitdump_index);
		break;
	default: {
		if (!asked)
			break;
		// Same code, same side file: only the address changes.
		const int ret = announce(to, r, false);

		if (ret)
			return ret;
		err = store_soon(r.file);
		const int unload = announce(from, it->second, true);
		if (unload)
			return unload;
		break;
	}
	}
	if (err)
		return err;
	regions.erase(it);
	regions.emplace(to, std::move(r));
	return 0;
}

namespace
{

void fork_prepare()
{
	if (Notifier *n = Notifier::existing())
		n->prepare();
}

void fork_parent()
{
	if (Notifier *n = Notifier::existing())
		n->parent();
}

void fork_child()
{
	g_fork_generation.fetch_add(1, std::memory_order_relaxed);
	if (Notifier *n = Notifier::existing())
		n->child();
}

// Runs @fn on a live session under its lock, turning exceptions into errors:
// none crosses the C boundary.
template <typename Fn>
int locked(perfjit_session *s, Fn &&fn)
{
	if (!s)
		return -EINVAL;
	try {
		const int nerr = Notifier::get().check_fork();

		if (nerr)
			return nerr;
		std::lock_guard<std::mutex> guard(s->lock);
		int err = s->check_fork();

		return err ? err : fn();
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	} catch (const std::exception &e) {
		try {
			s->log(PERFJIT_LOG_ERROR, e.what());
		} catch (...) {
		}
		return -EIO;
	} catch (...) {
		return -EIO;
	}
}

// Without the library's thread a load stores its side file itself, and
// then prunes the directory when that reaches the bound.
void prune_inline(perfjit_session *s)
{
	if (!s || !s->bound.due() || (s->own_thread && Notifier::get().has_writer()))
		return;
	try {
		std::lock_guard<std::mutex> flushing(s->flush_lock);

		s->prune_if_due();
	} catch (...) {
		// Pruned after a later load.
	}
}

} // namespace

extern "C" {

int perfjit_open(const perfjit_options *opts, perfjit_session **session)
{
	perfjit_options defaults{};

	if (!session)
		return -EINVAL;
	*session = nullptr;
	if (opts) {
		const int err = perfjit::copy_versioned(*opts, PERFJIT_OPTIONS_SIZE_VER0, defaults);

		if (err)
			return err;
	}
	try {
		std::call_once(g_atfork_once,
			       [] { pthread_atfork(fork_prepare, fork_parent, fork_child); });
		auto s = std::make_unique<perfjit_session>();
		int err = s->open(defaults);

		if (err)
			return err;
		*session = s.release();
		return 0;
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	} catch (...) {
		return -EIO;
	}
}

int perfjit_load(perfjit_session *session, const perfjit_code *code)
{
	return perfjit_load_many(session, &code, 1);
}

int perfjit_load_many(perfjit_session *session, const perfjit_code *const *codes, size_t n)
{
	const int err = locked(session, [&] { return session->load(codes, n); });

	prune_inline(session);
	return err;
}

int perfjit_unload(perfjit_session *session, const void *addr)
{
	return locked(session, [&] { return session->unload(reinterpret_cast<uintptr_t>(addr)); });
}

int perfjit_move(perfjit_session *session, const void *from, const void *to)
{
	if (!to)
		return -EINVAL;
	const int err = locked(session, [&] {
		return session->move(reinterpret_cast<uintptr_t>(from),
				     reinterpret_cast<uintptr_t>(to));
	});

	prune_inline(session);
	return err;
}

int perfjit_rundown(perfjit_session *session)
{
	if (!session)
		return -EINVAL;
	try {
		int err = Notifier::get().check_fork();

		if (err)
			return err;
		{
			std::lock_guard<std::mutex> guard(session->lock);

			err = session->check_fork();
		}
		if (err)
			return err;
		if (session->mode == PERFJIT_MODE_CODE_REGION)
			Notifier::get().drain_for_runtime();
		err = session->rundown();
		// The files it queued for the library's thread, if the session
		// has one: stored when this returns, and their errors its own.
		const int store_err = session->flush_pending();
		return err ? err : store_err;
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	} catch (...) {
		return -EIO;
	}
}

int perfjit_rundown_fd(perfjit_session *session)
{
	if (!session)
		return -EINVAL;
	if (session->mode != PERFJIT_MODE_CODE_REGION)
		return -EOPNOTSUPP;
	try {
		const int err = Notifier::get().check_fork();

		return err ? err : Notifier::get().fd();
	} catch (...) {
		return -EIO;
	}
}

void perfjit_close(perfjit_session *session)
{
	try {
		if (session && session->mode == PERFJIT_MODE_CODE_REGION) {
			Notifier::get().detach(session);
			// No thread stores them now.
			session->flush_pending();
			// At once, not one unpin per file as the regions go.
			session->pins.close();
		}
	} catch (...) {
		// A lock failed: the session is freed all the same.
	}
	// The destructor finishes the jitdump file.
	std::unique_ptr<perfjit_session> owned(session);
}

int perfjit_mode(const perfjit_session *session)
{
	return session ? session->mode : -EINVAL;
}

int perfjit_asked(perfjit_session *session)
{
	if (!session)
		return -EINVAL;
	try {
		std::lock_guard<std::mutex> guard(session->lock);

		return session->mode != PERFJIT_MODE_CODE_REGION || session->asked;
	} catch (...) {
		return -EIO;
	}
}

int perfjit_build_id(perfjit_session *session, const void *addr, uint8_t build_id[20])
{
	if (!build_id)
		return -EINVAL;
	return locked(session, [&] {
		auto it = session->regions.find(reinterpret_cast<uintptr_t>(addr));

		if (it == session->regions.end())
			return -ENOENT;
		if (session->mode != PERFJIT_MODE_CODE_REGION)
			return -ENODATA;
		const SideFile &file = it->second.file->laid();

		memcpy(build_id, file.id.data(), file.id.size());
		return 0;
	});
}

int perfjit_side_file(perfjit_session *session, const void *addr, char *path, size_t size)
{
	if (!path || !size || !session)
		return -EINVAL;
	try {
		// A file the library's thread has yet to store.
		session->flush_pending();
	} catch (...) {
		return -EIO;
	}
	return locked(session, [&] {
		auto it = session->regions.find(reinterpret_cast<uintptr_t>(addr));

		if (it == session->regions.end())
			return -ENOENT;
		if (!it->second.file->stored)
			return it->second.file->store_err ? it->second.file->store_err : -ENODATA;
		const std::string p = side_file_path(session->buildid_dir, it->second.file->id);
		if (p.size() >= size)
			return -ENAMETOOLONG;
		memcpy(path, p.c_str(), p.size() + 1);
		return 0;
	});
}

const char *perfjit_strerror(int err)
{
	switch (-err) {
	case 0:
		return "success";
	case EOPNOTSUPP:
		return "the kernel has no PR_PERF_CODE_REGION";
	case EEXIST:
		return "code is announced at this address already";
	case ENOENT:
		return "no code is announced at this address";
	case ENODATA:
		return "no side file for this code (nobody recorded, or a fallback mode)";
	case ESTALE:
		return "the side file was removed while its code is live";
	case EINVAL:
		return "invalid argument";
	case E2BIG:
		return "a field this library does not know is set (a newer perfjit.h)";
	default:
		return strerror(-err);
	}
}

} // extern "C"
