// SPDX-License-Identifier: LGPL-2.1-or-later
//
// perfjit-node: a Node.js addon that announces the code V8 generates
// through libperfjit, so that perf names JavaScript functions with no perf
// inject step and no perf-PID.map:
//
//   node -r perfjit-node app.js
//   NODE_OPTIONS=--require=perfjit-node node app.js
//   require('perfjit-node')          (from a program already running)
//
// Loading it starts it, in the isolate that loads it (a worker's too):
// V8 reports the code that exists (one batch, one side file) and then each
// piece of code it generates. Each is a code region named as V8 names it
// for --perf-basic-prof, without the "JS:" tag: "*fib /srv/app.js:3:13",
// the marker being V8's tier (~ interpreter, ^ Sparkplug, + Maglev,
// * TurboFan). Each new code of one function is a new generation (perf
// report --sort generation). When the GC moves code, its region moves;
// code that new code overwrites is unloaded. TurboFan code has a line
// table from V8's source positions, so perf annotate shows JavaScript
// lines. The builtins are left out: perf names them from node's own
// symbol table.
//
// Options, in $PERFJIT_NODE, comma-separated:
//   lines=0      no line tables
//   stats=1      print the addon's counters when an isolate ends
//   mode=auto|code-region|perf-map|jitdump  (libperfjit's modes)
//   dir=PATH     the build-id cache for side files ($PERF_BUILDID_DIR,
//                else ~/.debug)
//   max_dir=SIZE a bound for the side files there (bytes, or with K, M or
//                G); 256M by default, max_dir=none for no bound
#include <node.h>
#include <v8.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent_options.hpp"
#include "perfjit.hpp"

namespace
{

// perf's limit is 4096 bytes with the NUL; V8's names are that long at most.
constexpr size_t kNameMax = 4000;
// Scripts whose line ends are known to be computed, per isolate, at most;
// past it the set starts again (eval'd scripts come and go).
constexpr size_t kReadyScriptsMax = 65536;

using Options = perfjit::agent::CommonOptions;

pid_t gettid_()
{
	return static_cast<pid_t>(syscall(SYS_gettid));
}

std::string utf8(v8::Isolate *isolate, v8::Local<v8::Value> value)
{
	if (value.IsEmpty() || !value->IsString())
		return {};
	v8::String::Utf8Value s(isolate, value);
	return *s ? std::string(*s, s.length()) : std::string();
}

// What perf shows for a piece of code, from V8's name for it: "JS:*fib
// /srv/app.js:3:13" -> "*fib /srv/app.js:3:13" (an anonymous function:
// "*(anonymous) /srv/app.js:3:13"), "RegExp:[a-z]+" unchanged. @key gets
// the function without its tier, which its generations share.
std::string region_name(const char *str, size_t len, std::string &key)
{
	std::string name(str, len);

	if (name.compare(0, 3, "JS:") != 0) {
		key = name;
		return name.substr(0, kNameMax);
	}
	name.erase(0, 3);
	std::string marker;
	if (!name.empty() && strchr("~^+*", name[0])) {
		marker = name.substr(0, 1);
		name.erase(0, 1);
	}
	if (name.empty() || name[0] == ' ')
		name.insert(0, "(anonymous)");
	key = name;
	return (marker + name).substr(0, kNameMax);
}

class Agent;

// One isolate's side: the handler is per isolate, and so are script ids.
struct IsolateState {
	v8::Isolate *isolate = nullptr;
	pid_t thread = 0;		// the isolate's own thread: the only one on which
					// the handler may touch V8 objects
	const char *embedded = nullptr; // the builtins, in node's .text
	size_t embedded_len = 0;
	// Scripts whose line ends V8 has computed: a line lookup then
	// allocates nothing, which the handler must not do.
	std::set<int> lines_ready;
	// Scripts whose line ends an interrupt computes next, outside the
	// handler; the interrupt is requested once for all of them.
	std::vector<std::pair<int, v8::Global<v8::UnboundScript>>> lines_todo;
};

// A line table of TurboFan code, between V8's START and END events.
struct Positions {
	std::vector<std::pair<uint64_t, int>> rows; // code offset, script offset
};

class Agent
{
public:
	static Agent &get();

	int start(v8::Isolate *isolate, std::string &why);
	void stop(v8::Isolate *isolate);
	void print_stats();

private:
	struct Live {
		size_t len;
		v8::Isolate *isolate;
		std::string key;
	};

	static void on_event(const v8::JitCodeEvent *event);
	static void on_lines_todo(v8::Isolate *isolate, void *);
	void event(const v8::JitCodeEvent *event);
	void added(const v8::JitCodeEvent *event, IsolateState &is);
	void moved(const v8::JitCodeEvent *event);
	void unload_overlaps(uintptr_t start, size_t len, uintptr_t keep);
	void forget(std::map<uintptr_t, Live>::iterator it);
	std::vector<perfjit_line> lines_of(const v8::JitCodeEvent *event, IsolateState &is,
					   std::vector<std::pair<uint64_t, int>> rows);
	IsolateState *state_of(v8::Isolate *isolate);

	Options opts_;
	bool opened_ = false;
	std::unique_ptr<perfjit::Session> session_;
	// Everything below, and the session's calls, under lock_: V8 posts
	// moves from its GC's threads.
	std::mutex lock_;
	std::vector<std::unique_ptr<IsolateState>> isolates_;
	std::map<uintptr_t, Live> live_;			// by start address
	std::unordered_map<std::string, uint32_t> gens_;	// next generation
	std::unordered_map<std::string, uint32_t> live_keys_;	// live regions per key
	std::map<uintptr_t, std::unique_ptr<Positions>> ended_; // END seen, ADDED to come
	// The existing code that SetJitCodeEventHandler() reports, loaded as
	// one batch when it returns.
	bool enumerating_ = false;
	struct Pending {
		perfjit_code code;
		std::string name, source;
		std::vector<perfjit_line> lines;
	};
	std::vector<std::unique_ptr<Pending>> batch_;
	// stats=1
	std::atomic<uint64_t> loads_{0}, moves_{0}, overwritten_{0}, errors_{0}, lines_{0};
};

Agent &Agent::get()
{
	// Never destroyed: V8's threads may post events until the process is
	// gone.
	static Agent *agent = new Agent;

	return *agent;
}

IsolateState *Agent::state_of(v8::Isolate *isolate)
{
	for (auto &is : isolates_)
		if (is->isolate == isolate)
			return is.get();
	return nullptr;
}

void Agent::on_event(const v8::JitCodeEvent *event)
{
	get().event(event);
}

void Agent::event(const v8::JitCodeEvent *e)
{
	switch (e->type) {
	case v8::JitCodeEvent::CODE_START_LINE_INFO_RECORDING:
		// V8 hands user_data back with each row and at the end.
		const_cast<v8::JitCodeEvent *>(e)->user_data =
			opts_.lines && e->code_type == v8::JitCodeEvent::JIT_CODE ? new Positions
										  : nullptr;
		return;
	case v8::JitCodeEvent::CODE_ADD_LINE_POS_INFO:
		if (e->user_data && e->line_info.position_type == v8::JitCodeEvent::POSITION)
			static_cast<Positions *>(e->user_data)
				->rows.emplace_back(e->line_info.offset,
						    static_cast<int>(e->line_info.pos));
		return;
	case v8::JitCodeEvent::CODE_END_LINE_INFO_RECORDING: {
		std::unique_ptr<Positions> p(static_cast<Positions *>(e->user_data));
		if (!p)
			return;
		std::lock_guard<std::mutex> guard(lock_);
		ended_[reinterpret_cast<uintptr_t>(e->code_start)] = std::move(p);
		// An END whose code never came: at most a few are left over.
		while (ended_.size() > 64)
			ended_.erase(ended_.begin());
		return;
	}
	case v8::JitCodeEvent::CODE_ADDED: {
		std::lock_guard<std::mutex> guard(lock_);
		IsolateState *is = state_of(e->isolate);
		if (is)
			added(e, *is);
		return;
	}
	case v8::JitCodeEvent::CODE_MOVED: {
		std::lock_guard<std::mutex> guard(lock_);
		moved(e);
		return;
	}
	default:
		return;
	}
}

// Unloads the live regions that [start, start + len) overlaps, but @keep.
void Agent::unload_overlaps(uintptr_t start, size_t len, uintptr_t keep)
{
	auto it = live_.upper_bound(start);

	if (it != live_.begin() && std::prev(it)->first + std::prev(it)->second.len > start)
		--it;
	while (it != live_.end() && it->first < start + len) {
		auto next = std::next(it);
		if (it->first != keep) {
			if (session_)
				session_->unload(reinterpret_cast<const void *>(it->first));
			overwritten_++;
			forget(it);
		}
		it = next;
	}
}

void Agent::forget(std::map<uintptr_t, Live>::iterator it)
{
	auto k = live_keys_.find(it->second.key);

	if (k != live_keys_.end() && !--k->second) {
		live_keys_.erase(k);
		gens_.erase(it->second.key);
	}
	live_.erase(it);
}

// Lines of @rows (code offset, script offset) in the script of @e, once
// V8 has the script's line ends; else none now, and the loop has them
// computed for the next code of that script.
std::vector<perfjit_line> Agent::lines_of(const v8::JitCodeEvent *e, IsolateState &is,
					  std::vector<std::pair<uint64_t, int>> rows)
{
	std::vector<perfjit_line> lines;

	if (e->script.IsEmpty() || gettid_() != is.thread)
		return lines;
	const int id = e->script->GetId();
	if (!is.lines_ready.count(id)) {
		const bool queued = std::any_of(is.lines_todo.begin(), is.lines_todo.end(),
						[id](const auto &t) { return t.first == id; });
		if (!queued) {
			if (is.lines_todo.empty())
				is.isolate->RequestInterrupt(on_lines_todo, nullptr);
			is.lines_todo.emplace_back(
				id, v8::Global<v8::UnboundScript>(is.isolate, e->script));
		}
		return lines;
	}
	std::stable_sort(rows.begin(), rows.end(),
			 [](const auto &a, const auto &b) { return a.first < b.first; });
	for (const auto &[offset, pos] : rows) {
		if (offset >= e->code_len)
			continue;
		const int line = e->script->GetLineNumber(pos) + 1;
		const int column = e->script->GetColumnNumber(pos) + 1;
		if (line <= 0)
			continue;
		// One row per offset: the last position V8 gave for it.
		if (!lines.empty() && lines.back().offset == offset)
			lines.pop_back();
		if (!lines.empty() && lines.back().line == static_cast<uint32_t>(line))
			continue;
		lines.push_back({offset, static_cast<uint32_t>(line),
				 static_cast<uint32_t>(column > 0 ? column : 0)});
	}
	return lines;
}

void Agent::added(const v8::JitCodeEvent *e, IsolateState &is)
{
	const auto start = reinterpret_cast<uintptr_t>(e->code_start);
	std::unique_ptr<Positions> positions;

	if (auto it = ended_.find(start); it != ended_.end()) {
		positions = std::move(it->second);
		ended_.erase(it);
	}
	// Bytecode is data, not code; it only gives a script whose line ends
	// to have ready before its function's optimized code comes.
	if (e->code_type != v8::JitCodeEvent::JIT_CODE || !e->code_len) {
		if (opts_.lines && e->code_type == v8::JitCodeEvent::BYTE_CODE)
			lines_of(e, is, {});
		return;
	}
	const char *code = static_cast<const char *>(e->code_start);
	if (code >= is.embedded && code < is.embedded + is.embedded_len)
		return;

	auto pending = std::make_unique<Pending>();
	std::string key;
	pending->name = region_name(e->name.str, e->name.len, key);
	// The same code reported again (V8's enumeration may list it twice).
	if (auto it = live_.find(start);
	    it != live_.end() && it->second.len == e->code_len && it->second.key == key)
		return;
	unload_overlaps(start, e->code_len, 0);

	if (opts_.lines && !e->script.IsEmpty() && gettid_() == is.thread) {
		pending->source = utf8(is.isolate, e->script->GetScriptName());
		if (positions && !pending->source.empty())
			pending->lines = lines_of(e, is, std::move(positions->rows));
		else if (!is.lines_ready.count(e->script->GetId()))
			lines_of(e, is, {});
	}
	perfjit_code &c = pending->code;
	c.size = sizeof(c);
	c.generation = gens_[key]++;
	c.name = pending->name.c_str();
	c.addr = e->code_start;
	c.len = e->code_len;
	if (!pending->lines.empty()) {
		c.source_file = pending->source.c_str();
		c.lines = pending->lines.data();
		c.nr_lines = pending->lines.size();
		lines_++;
	}
	live_[start] = {e->code_len, e->isolate, key};
	live_keys_[key]++;
	if (enumerating_) {
		batch_.push_back(std::move(pending));
		return;
	}
	if (!session_ || session_->load(c)) {
		errors_++;
		forget(live_.find(start));
		return;
	}
	loads_++;
}

void Agent::moved(const v8::JitCodeEvent *e)
{
	const auto from = reinterpret_cast<uintptr_t>(e->code_start);
	const auto to = reinterpret_cast<uintptr_t>(e->new_code_start);
	auto it = live_.find(from);

	if (it == live_.end() || from == to)
		return;
	Live l = std::move(it->second);
	live_.erase(it);
	unload_overlaps(to, l.len, 0);
	if (!session_ || session_->move(e->code_start, e->new_code_start)) {
		errors_++;
		auto k = live_keys_.find(l.key);
		if (k != live_keys_.end() && !--k->second)
			live_keys_.erase(k);
		return;
	}
	live_[to] = std::move(l);
	moves_++;
}

// V8 runs interrupts on the isolate's thread between two steps of
// JavaScript, a synchronous script's too, where V8's API may allocate.
void Agent::on_lines_todo(v8::Isolate *isolate, void *)
{
	Agent &a = get();
	std::vector<std::pair<int, v8::Global<v8::UnboundScript>>> todo;

	{
		std::lock_guard<std::mutex> guard(a.lock_);
		IsolateState *is = a.state_of(isolate);
		if (!is)
			return;
		todo.swap(is->lines_todo);
	}
	// Outside the handler and the lock: this may allocate, and a GC may
	// post moves.
	v8::HandleScope scope(isolate);
	std::vector<int> done;
	for (auto &[id, script] : todo) {
		script.Get(isolate)->GetLineNumber(0);
		done.push_back(id);
	}
	std::lock_guard<std::mutex> guard(a.lock_);
	if (IsolateState *is = a.state_of(isolate)) {
		if (is->lines_ready.size() + done.size() > kReadyScriptsMax)
			is->lines_ready.clear();
		is->lines_ready.insert(done.begin(), done.end());
	}
}

int Agent::start(v8::Isolate *isolate, std::string &why)
{
	std::unique_lock<std::mutex> guard(lock_);

	if (state_of(isolate))
		return 0; // required again: already on
	if (!opened_) {
		auto bad = perfjit::agent::for_each_option(
			getenv("PERFJIT_NODE"),
			[this](const std::string &key, const std::string &val) {
				return perfjit::agent::parse_common(key, val, opts_);
			});
		if (bad) {
			why = "unknown option '" + *bad + "' in $PERFJIT_NODE";
			return -EINVAL;
		}
		perfjit_options po{};
		po.size = sizeof(po);
		po.mode = opts_.mode;
		po.buildid_dir = opts_.dir.empty() ? nullptr : opts_.dir.c_str();
		po.max_dir_bytes = opts_.max_dir;
		auto s = std::make_unique<perfjit::Session>(&po);
		if (!s->ok()) {
			why = std::string("perfjit_open: ") + perfjit_strerror(-s->error().value());
			return -s->error().value();
		}
		session_ = std::move(s);
		opened_ = true;
	}
	auto is = std::make_unique<IsolateState>();
	is->isolate = isolate;
	is->thread = gettid_();
	const void *blob = nullptr;
	isolate->GetEmbeddedCodeRange(&blob, &is->embedded_len);
	is->embedded = static_cast<const char *>(blob);
	isolates_.push_back(std::move(is));

	// V8 reports the existing code from within this call, on this thread:
	// collected, and loaded as one batch.
	enumerating_ = true;
	guard.unlock();
	isolate->SetJitCodeEventHandler(v8::kJitCodeEventEnumExisting, on_event);
	guard.lock();
	enumerating_ = false;
	std::vector<const perfjit_code *> codes;
	for (auto &p : batch_)
		codes.push_back(&p->code);
	if (!codes.empty()) {
		if (session_->load(codes)) {
			errors_ += codes.size();
			for (auto &p : batch_) {
				auto it = live_.find(reinterpret_cast<uintptr_t>(p->code.addr));
				if (it != live_.end())
					forget(it);
			}
		} else {
			loads_ += codes.size();
		}
	}
	batch_.clear();
	return 0;
}

// The isolate is going away (a worker that ended, or the process): its
// code with it.
void Agent::stop(v8::Isolate *isolate)
{
	isolate->SetJitCodeEventHandler(v8::kJitCodeEventDefault, nullptr);
	if (opts_.stats)
		print_stats();
	std::lock_guard<std::mutex> guard(lock_);
	for (auto it = live_.begin(); it != live_.end();) {
		auto next = std::next(it);
		if (it->second.isolate == isolate) {
			if (session_)
				session_->unload(reinterpret_cast<const void *>(it->first));
			forget(it);
		}
		it = next;
	}
	auto is = std::find_if(isolates_.begin(), isolates_.end(),
			       [isolate](const auto &s) { return s->isolate == isolate; });
	if (is != isolates_.end())
		isolates_.erase(is);
}

void Agent::print_stats()
{
	std::lock_guard<std::mutex> guard(lock_);

	fprintf(stderr,
		"perfjit-node: loads=%llu moves=%llu overwritten=%llu errors=%llu "
		"with_lines=%llu live=%zu functions=%zu\n",
		static_cast<unsigned long long>(loads_), static_cast<unsigned long long>(moves_),
		static_cast<unsigned long long>(overwritten_),
		static_cast<unsigned long long>(errors_), static_cast<unsigned long long>(lines_),
		live_.size(), gens_.size());
}

void stats(const v8::FunctionCallbackInfo<v8::Value> &)
{
	Agent::get().print_stats();
}

} // namespace

NODE_MODULE_INIT(/* exports, module, context */)
{
	v8::Isolate *isolate = context->GetIsolate();
	std::string why;

	if (Agent::get().start(isolate, why)) {
		isolate->ThrowException(v8::Exception::Error(
			v8::String::NewFromUtf8(isolate, ("perfjit-node: " + why).c_str())
				.ToLocalChecked()));
		return;
	}
	node::AddEnvironmentCleanupHook(
		isolate, [](void *arg) { Agent::get().stop(static_cast<v8::Isolate *>(arg)); },
		isolate);
	NODE_SET_METHOD(exports, "stats", stats);
}
