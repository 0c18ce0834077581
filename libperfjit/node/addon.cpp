// SPDX-License-Identifier: LGPL-2.1-or-later
//
// perfjit-node: a Node.js addon that announces the code V8 generates
// through libperfjit, so that perf names JavaScript functions with no perf
// inject step and no perf-PID.map:
//
//   node -r perfjit-node app.js
//   NODE_OPTIONS=--require=perfjit-node node app.js
//   require('perfjit-node')          (from a program already running)
//   node .../perfjit-node/attach.js PID   (into a process started without it)
//
// Loading it starts it, in the isolate that loads it (a worker's too;
// loading it again changes nothing), but V8 reports nothing until a
// recorder asks for the process's code: V8 with a code-event handler
// compiles more slowly, whatever the handler does. When one asks (at once
// under perf record -- node ..., or in the perf-map and jitdump modes),
// V8 reports the code that exists (one batch, one side file) and then each
// piece of code it generates, in that process for good. Each is
// a code region named as V8 names it for --perf-basic-prof, without the
// "JS:" tag: "*fib /srv/app.js:3:13", the marker being V8's tier (~
// interpreter, ^ Sparkplug, + Maglev, * TurboFan). Each new code of one
// function is a new generation (perf report --sort generation). When the
// GC moves code, its region moves. V8 reports no code that dies: a region
// lives until new code overlaps it. TurboFan code has a line table from
// V8's source positions, so perf annotate shows JavaScript lines (of
// scripts that are files). The builtins are left out: perf names them
// from node's own symbol table.
//
// Options, in $PERFJIT_NODE, comma-separated:
//   lines=0      no line tables
//   stats=1      print the addon's counters when an isolate ends
//   handler=ask|load  install V8's code-event handler when a recorder
//                asks (the default), or when the addon loads: then a
//                recorder that comes later also names code that V8
//                compiled for on-stack replacement before it came (V8's
//                enumeration of existing code leaves such code out), at
//                V8's cost of a handler while nobody records
//   mode=auto|code-region|perf-map|jitdump  (libperfjit's modes)
//   dir=PATH     the build-id cache for side files ($PERF_BUILDID_DIR,
//                else ~/.debug)
//   max_dir=SIZE a bound for the side files there (bytes, or with K, M or
//                G); 256M by default, max_dir=none for no bound
// A bad option, or a library that cannot start, is reported on stderr and
// leaves the program running as it would without the addon: with
// NODE_OPTIONS, every Node process loads it.
#include <node.h>
#include <v8.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent_log.hpp"
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

// The calling thread, with no system call: V8 calls the handler for
// every code object, thousands at start.
std::thread::id this_thread()
{
	return std::this_thread::get_id();
}

std::string utf8(v8::Isolate *isolate, v8::Local<v8::Value> value)
{
	if (value.IsEmpty() || !value->IsString())
		return {};
	v8::String::Utf8Value s(isolate, value);
	return *s ? std::string(*s, s.length()) : std::string();
}

// A script's name as a file that perf annotate can read: a path, or a
// file:// URL (ES modules) decoded; empty for node:internal/..., eval'd
// code and the like.
std::string source_path(const std::string &name)
{
	if (!name.empty() && name[0] == '/')
		return name;
	if (name.compare(0, 7, "file://") != 0)
		return {};
	std::string path;
	for (size_t i = 7; i < name.size(); i++) {
		if (name[i] == '%' && i + 2 < name.size() && isxdigit(name[i + 1]) &&
		    isxdigit(name[i + 2])) {
			path += static_cast<char>(std::stoi(name.substr(i + 1, 2), nullptr, 16));
			i += 2;
		} else {
			path += name[i];
		}
	}
	return path.empty() || path[0] != '/' ? std::string() : path;
}

// @s cut to at most @max bytes, not inside a UTF-8 character.
std::string cut(std::string s, size_t max)
{
	if (s.size() <= max)
		return s;
	size_t n = max;
	while (n && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80)
		n--;
	s.resize(n);
	return s;
}

// What perf shows for a piece of code, from V8's name for it: "JS:*fib
// /srv/app.js:3:13" -> "*fib /srv/app.js:3:13", an anonymous function
// "*(anonymous) /srv/app.js:3:13", a script's top level "~(script)
// /srv/app.js", "RegExp:[a-z]+" unchanged. @key gets the name without the
// tier, which the function's generations share; @line the line the
// function starts on (0: unknown).
std::string region_name(const char *str, size_t len, std::string &key, int &line)
{
	static const std::pair<const char *, const char *> tags[] = {
		{"JS:", "(anonymous)"}, {"Script:", "(script)"}, {"Eval:", "(eval)"}};
	std::string name(str, len);

	line = 0;
	const auto *tag = std::find_if(std::begin(tags), std::end(tags), [&](const auto &t) {
		return name.compare(0, strlen(t.first), t.first) == 0;
	});
	if (tag == std::end(tags)) {
		key = name;
		return cut(name, kNameMax);
	}
	name.erase(0, strlen(tag->first));
	std::string marker;
	if (!name.empty() && strchr("~^+*", name[0])) {
		marker = name.substr(0, 1);
		name.erase(0, 1);
	}
	if (name.empty() || name[0] == ' ')
		name.insert(0, tag->second);
	// "...:LINE:COLUMN" at the end.
	const size_t c2 = name.rfind(':');
	const size_t c1 =
		c2 == std::string::npos || !c2 ? std::string::npos : name.rfind(':', c2 - 1);
	if (c1 != std::string::npos && c2 > c1 + 1 &&
	    name.find_first_not_of("0123456789", c1 + 1) == c2)
		line = atoi(name.c_str() + c1 + 1);
	key = name;
	return cut(marker + name, kNameMax);
}

// One isolate's side: the handler is per isolate, and so are script ids.
struct IsolateState {
	v8::Isolate *isolate = nullptr;
	std::thread::id thread;		  // the isolate's own thread: the only one on which
					  // the handler may touch V8 objects
	node::Environment *env = nullptr; // for node::RequestInterrupt()
	// The context the module was loaded in, for V8's enumeration from an
	// interrupt; reset in stop(), on the isolate's thread.
	v8::Global<v8::Context> context;
	const char *embedded = nullptr; // the builtins, in node's .text
	size_t embedded_len = 0;
	bool handler = false;	  // the handler is installed (or being installed)
	bool requested = false;	  // an interrupt is to install it
	bool enumerating = false; // within SetJitCodeEventHandler()
	// Scripts whose line ends V8 has computed, by id, with their paths
	// (empty: not a file): a line lookup then allocates nothing, which
	// the handler must not do, and the name is not read in the handler.
	std::unordered_map<int, std::string> scripts;
	// Scripts whose line ends an interrupt computes next, outside the
	// handler; the interrupt is requested once for all of them.
	std::vector<std::pair<int, v8::Global<v8::UnboundScript>>> todo;
};

// The line positions of a TurboFan compile, from V8's START to its END.
struct Positions {
	std::vector<std::pair<uint64_t, int>> rows; // code offset, script offset
};

class Agent
{
public:
	static Agent &get();

	// 0: started, 1: running already in @isolate, < 0: not started (@why).
	int start(v8::Local<v8::Context> context, std::string &why);
	void stop(v8::Isolate *isolate);
	void print_stats();

private:
	struct Live {
		size_t len;
		v8::Isolate *isolate;
		std::string key;
	};
	// A function's generations: the next one, and its regions now live.
	struct Function {
		uint32_t next = 0;
		uint32_t live = 0;
	};
	using FunctionKey = std::pair<v8::Isolate *, std::string>;
	// A region of the existing code, loaded with the others at the end
	// of the enumeration.
	struct Pending {
		perfjit_code code;
		std::string name, source;
		std::vector<perfjit_line> lines;
	};
	// The positions that V8's END gave last on a thread, for the code
	// that its next CODE_ADDED on that thread reports.
	struct Ended {
		uintptr_t start = 0;
		std::vector<std::pair<uint64_t, int>> rows;
	};

	static void on_event(const v8::JitCodeEvent *event);
	static void on_scripts(v8::Isolate *isolate, void *);
	static void on_asked(void *);
	static void on_install(void *isolate);
	void install(v8::Isolate *isolate, bool on_ask);
	void event(const v8::JitCodeEvent *event);
	void code_added(const v8::JitCodeEvent *event);
	void add_region(const v8::JitCodeEvent *e, IsolateState &is, std::string name,
			const std::string &key, std::string source,
			std::vector<perfjit_line> lines);
	void moved(const v8::JitCodeEvent *event);
	void unload_overlaps(uintptr_t start, size_t len);
	void forget(std::map<uintptr_t, Live>::iterator it);
	void drop_function(const Live &l);
	void want_script(IsolateState &is, v8::Local<v8::UnboundScript> script, int id);
	static std::vector<perfjit_line> lines_of(const v8::JitCodeEvent *e, v8::Isolate *isolate,
						  std::vector<std::pair<uint64_t, int>> rows,
						  int first_line);
	IsolateState *state_of(v8::Isolate *isolate);

	Options opts_;
	bool handler_at_load_ = false; // handler=load
	bool opened_ = false;
	// What the library reports from its thread; outlives the session.
	perfjit::agent::StderrLog log_{"perfjit-node"};
	std::unique_ptr<perfjit::Session> session_;
	// Held by on_asked() while it asks isolates for an interrupt, and by
	// stop() before lock_: an isolate's Environment outlives the request.
	std::mutex ask_lock_;
	// Everything below, and the session's calls, under lock_: V8 posts
	// moves from its GC's threads. No V8 call is made under it.
	std::mutex lock_;
	std::vector<std::unique_ptr<IsolateState>> isolates_;
	std::map<uintptr_t, Live> live_; // by start address
	std::map<FunctionKey, Function> functions_;
	std::unordered_map<std::thread::id, Ended> ended_;
	std::vector<std::unique_ptr<Pending>> batch_;
	// stats=1
	uint64_t loads_ = 0, moves_ = 0, overwritten_ = 0, errors_ = 0, lines_ = 0;
	uint64_t on_ask_ = 0; // isolates whose handler a recorder's ask installed
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
		// V8 hands user_data back with each row and at END, where the
		// Positions is taken back into a unique_ptr.
		const_cast<v8::JitCodeEvent *>(e)->user_data =
			opts_.lines && e->code_type == v8::JitCodeEvent::JIT_CODE
				? std::make_unique<Positions>().release()
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
		// One per thread: a compile whose code is thrown away has its
		// END and no CODE_ADDED; the next END replaces it.
		ended_[this_thread()] = {reinterpret_cast<uintptr_t>(e->code_start),
					 std::move(p->rows)};
		return;
	}
	case v8::JitCodeEvent::CODE_ADDED:
		code_added(e);
		return;
	case v8::JitCodeEvent::CODE_MOVED: {
		std::lock_guard<std::mutex> guard(lock_);
		moved(e);
		return;
	}
	default:
		return;
	}
}

// Unloads the live regions that [start, start + len) overlaps.
void Agent::unload_overlaps(uintptr_t start, size_t len)
{
	auto it = live_.upper_bound(start);

	if (it != live_.begin() && std::prev(it)->first + std::prev(it)->second.len > start)
		--it;
	while (it != live_.end() && it->first < start + len) {
		auto next = std::next(it);
		if (session_)
			session_->unload(reinterpret_cast<const void *>(it->first));
		overwritten_++;
		forget(it);
		it = next;
	}
}

void Agent::drop_function(const Live &l)
{
	auto f = functions_.find({l.isolate, l.key});

	if (f != functions_.end() && !--f->second.live)
		functions_.erase(f);
}

void Agent::forget(std::map<uintptr_t, Live>::iterator it)
{
	drop_function(it->second);
	live_.erase(it);
}

// Has the interrupt compute @script's line ends. On the isolate's thread,
// in the handler, without the lock: a Global is made here.
void Agent::want_script(IsolateState &is, v8::Local<v8::UnboundScript> script, int id)
{
	bool queued, first;
	{
		std::lock_guard<std::mutex> guard(lock_);
		queued = std::any_of(is.todo.begin(), is.todo.end(),
				     [id](const auto &t) { return t.first == id; });
		first = is.todo.empty();
	}
	if (queued)
		return;
	v8::Global<v8::UnboundScript> global(is.isolate, script);
	{
		std::lock_guard<std::mutex> guard(lock_);
		is.todo.emplace_back(id, std::move(global));
	}
	if (first)
		is.isolate->RequestInterrupt(on_scripts, nullptr);
}

// Lines of @rows (code offset, script offset) in the script of @e, whose
// line ends V8 has computed. Rows before @first_line, the line the
// function starts on, are dropped: V8 passes positions of code inlined
// from other functions without saying which script they are in. A table
// with an offset past the code is not this code's.
std::vector<perfjit_line> Agent::lines_of(const v8::JitCodeEvent *e, v8::Isolate *isolate,
					  std::vector<std::pair<uint64_t, int>> rows,
					  int first_line)
{
	std::vector<perfjit_line> lines;

	std::stable_sort(rows.begin(), rows.end(),
			 [](const auto &a, const auto &b) { return a.first < b.first; });
	if (rows.empty() || rows.back().first >= e->code_len)
		return lines;
	v8::HandleScope scope(isolate);
	for (const auto &[offset, pos] : rows) {
		const int line = e->script->GetLineNumber(pos) + 1;
		const int column = e->script->GetColumnNumber(pos) + 1;
		if (line <= 0 || line < first_line)
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

void Agent::code_added(const v8::JitCodeEvent *e)
{
	const std::thread::id tid = this_thread();
	const auto start = reinterpret_cast<uintptr_t>(e->code_start);
	const bool code = (e->code_type == v8::JitCodeEvent::JIT_CODE ||
			   e->code_type == v8::JitCodeEvent::WASM_CODE) &&
			  e->code_len;
	IsolateState *is;
	Ended ended;
	{
		std::lock_guard<std::mutex> guard(lock_);
		is = state_of(e->isolate);
		if (!is)
			return;
		if (auto it = ended_.find(tid); it != ended_.end() && code) {
			if (it->second.start == start)
				ended = std::move(it->second);
			ended_.erase(it);
		}
	}
	// An isolate's state goes only in stop(), on its own thread.
	const bool own_thread = tid == is->thread;
	if (code && reinterpret_cast<const char *>(start) >= is->embedded &&
	    reinterpret_cast<const char *>(start) < is->embedded + is->embedded_len)
		return;

	// Names only for code: bytecode events are many, and need none.
	std::string key, name;
	int first_line = 0;
	if (code)
		name = region_name(e->name.str, e->name.len, key, first_line);
	std::string source;
	std::vector<perfjit_line> lines;
	// Bytecode is data, not code: it only gives a script whose line ends
	// to have ready before its function's optimized code comes. V8's API
	// only on the isolate's thread, and never under the lock.
	if (opts_.lines && own_thread && !e->script.IsEmpty()) {
		const int id = e->script->GetId();
		bool ready;
		{
			std::lock_guard<std::mutex> guard(lock_);
			auto s = is->scripts.find(id);
			ready = s != is->scripts.end();
			if (ready)
				source = s->second;
		}
		if (!ready)
			want_script(*is, e->script, id);
		else if (code && !source.empty() && !ended.rows.empty())
			lines = lines_of(e, is->isolate, std::move(ended.rows), first_line);
	}
	if (!code)
		return;
	if (lines.empty())
		source.clear();
	std::lock_guard<std::mutex> guard(lock_);
	add_region(e, *is, std::move(name), key, std::move(source), std::move(lines));
}

void Agent::add_region(const v8::JitCodeEvent *e, IsolateState &is, std::string name,
		       const std::string &key, std::string source, std::vector<perfjit_line> lines)
{
	const auto start = reinterpret_cast<uintptr_t>(e->code_start);

	// The same code reported again (V8's enumeration may list it twice).
	if (auto it = live_.find(start); it != live_.end() && it->second.len == e->code_len &&
					 it->second.isolate == e->isolate && it->second.key == key)
		return;
	unload_overlaps(start, e->code_len);

	auto pending = std::make_unique<Pending>();
	pending->name = std::move(name);
	pending->source = std::move(source);
	pending->lines = std::move(lines);
	Function &f = functions_[{e->isolate, key}];
	perfjit_code &c = pending->code;
	c.size = sizeof(c);
	c.generation = f.next++;
	c.name = pending->name.c_str();
	c.addr = e->code_start;
	c.len = e->code_len;
	if (!pending->lines.empty()) {
		c.source_file = pending->source.c_str();
		c.lines = pending->lines.data();
		c.nr_lines = pending->lines.size();
		lines_++;
	}
	f.live++;
	live_[start] = {e->code_len, e->isolate, key};
	if (is.enumerating) {
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
	unload_overlaps(to, l.len);
	// A region of the enumeration's batch is not loaded yet: its entry
	// follows the code.
	for (auto &p : batch_) {
		if (p->code.addr == e->code_start) {
			p->code.addr = e->new_code_start;
			live_[to] = std::move(l);
			return;
		}
	}
	if (!session_ || session_->move(e->code_start, e->new_code_start)) {
		errors_++;
		drop_function(l);
		return;
	}
	live_[to] = std::move(l);
	moves_++;
}

// V8 runs interrupts on the isolate's thread between two steps of
// JavaScript, a synchronous script's too, where V8's API may allocate.
void Agent::on_scripts(v8::Isolate *isolate, void *)
{
	Agent &a = get();
	std::vector<std::pair<int, v8::Global<v8::UnboundScript>>> todo;

	{
		std::lock_guard<std::mutex> guard(a.lock_);
		IsolateState *is = a.state_of(isolate);
		if (!is)
			return;
		todo.swap(is->todo);
	}
	// Outside the lock: this may allocate, and a GC may post moves.
	v8::HandleScope scope(isolate);
	std::vector<std::pair<int, std::string>> done;
	for (auto &[id, script] : todo) {
		v8::Local<v8::UnboundScript> s = script.Get(isolate);
		s->GetLineNumber(0);
		done.emplace_back(id, source_path(utf8(isolate, s->GetScriptName())));
	}
	std::lock_guard<std::mutex> guard(a.lock_);
	if (IsolateState *is = a.state_of(isolate)) {
		if (is->scripts.size() + done.size() > kReadyScriptsMax)
			is->scripts.clear();
		is->scripts.insert(done.begin(), done.end());
	}
}

// A recorder asked for the process's code: on the library's thread, after
// its rundown. Each isolate whose handler is not installed is asked to
// install it, in a V8 interrupt (JavaScript running) or from its event
// loop (idle), whichever comes first.
void Agent::on_asked(void *)
{
	Agent &a = get();
	std::lock_guard<std::mutex> ask(a.ask_lock_);
	std::vector<std::pair<node::Environment *, v8::Isolate *>> todo;

	{
		std::lock_guard<std::mutex> guard(a.lock_);
		for (auto &is : a.isolates_) {
			if (is->handler || is->requested)
				continue;
			is->requested = true;
			todo.emplace_back(is->env, is->isolate);
		}
	}
	// Outside lock_ (V8's own locks), under ask_lock_: stop() waits for
	// it before its isolate's Environment goes.
	for (auto &[env, isolate] : todo)
		node::RequestInterrupt(env, on_install, isolate);
}

// On the isolate's thread, JavaScript stopped between two steps or the
// event loop between two callbacks; or while the Environment is freed,
// before stop() (Node drains interrupts first): the isolate's code is
// then reported only to be unloaded by stop().
void Agent::on_install(void *isolate)
{
	get().install(static_cast<v8::Isolate *>(isolate), true);
}

// Installs the handler in @isolate, once: V8 reports the existing code from
// within SetJitCodeEventHandler(), on this thread (and may post moves
// meanwhile), which is collected and loaded as one batch.
void Agent::install(v8::Isolate *isolate, bool on_ask)
{
	std::unique_lock<std::mutex> guard(lock_);
	IsolateState *is = state_of(isolate);

	if (!is || is->handler)
		return;
	is->handler = true;
	is->enumerating = true;
	if (on_ask)
		on_ask_++;
	guard.unlock();
	{
		v8::HandleScope scope(isolate);
		v8::Context::Scope context(is->context.Get(isolate));

		isolate->SetJitCodeEventHandler(v8::kJitCodeEventEnumExisting, on_event);
	}
	guard.lock();
	is->enumerating = false;
	std::vector<const perfjit_code *> codes;
	for (auto &p : batch_)
		codes.push_back(&p->code);
	bool loaded = false;
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
			loaded = true;
		}
	}
	batch_.clear();
	guard.unlock();
	// The batch is code that ran before now, perhaps while a recorder
	// that asked waited for this interrupt: announced again as a rundown,
	// live from before, so that the recorder names those samples too.
	// Not before a recorder asked (handler=load): a rundown would have
	// the library announce and store with nobody recording.
	if (loaded && session_->mode() == PERFJIT_MODE_CODE_REGION && session_->asked() == 1 &&
	    session_->rundown()) {
		std::lock_guard<std::mutex> again(lock_);
		errors_++;
	}
}

// Until a recorder asks for the process's code, no handler: with one, V8
// reports every compile, and its compiler and code allocation slow down by
// about a tenth in a workload that compiles much, whatever the handler
// does. The handler is installed at once when a recorder asked already
// (perf record -- node ...) or the mode writes a file (perf-map, jitdump).
int Agent::start(v8::Local<v8::Context> context, std::string &why)
{
	v8::Isolate *isolate = context->GetIsolate();
	std::unique_lock<std::mutex> guard(lock_);

	if (state_of(isolate))
		return 1;
	if (!opened_) {
		Options o;
		bool at_load = false;
		auto bad = perfjit::agent::for_each_option(
			getenv("PERFJIT_NODE"),
			[&o, &at_load](const std::string &key, const std::string &val) {
				if (key == "handler" && (val == "ask" || val == "load")) {
					at_load = val == "load";
					return true;
				}
				return perfjit::agent::parse_common(key, val, o);
			});
		if (bad) {
			why = "unknown option '" + *bad + "' in $PERFJIT_NODE";
			return -EINVAL;
		}
		perfjit_options po{};
		po.size = sizeof(po);
		po.mode = o.mode;
		po.buildid_dir = o.dir.empty() ? nullptr : o.dir.c_str();
		po.max_dir_bytes = o.max_dir;
		po.on_asked = on_asked;
		log_.attach(po);
		auto s = std::make_unique<perfjit::Session>(&po);
		if (!s->ok()) {
			why = std::string("perfjit_open: ") + perfjit_strerror(-s->error().value());
			return -s->error().value();
		}
		opts_ = std::move(o);
		handler_at_load_ = at_load;
		session_ = std::move(s);
		opened_ = true;
	}
	auto owned = std::make_unique<IsolateState>();
	IsolateState &is = *owned;
	is.isolate = isolate;
	is.thread = this_thread();
	is.env = node::GetCurrentEnvironment(context);
	is.context.Reset(isolate, context);
	const void *blob = nullptr;
	isolate->GetEmbeddedCodeRange(&blob, &is.embedded_len);
	is.embedded = static_cast<const char *>(blob);
	isolates_.push_back(std::move(owned));
	guard.unlock();

	// A recorder that asks from now on finds the isolate; one that asked
	// before has set what this reads.
	if (handler_at_load_ || session_->asked() == 1)
		install(isolate, false);
	return 0;
}

// The isolate is going away (a worker that ended, or the process): its
// code with it.
void Agent::stop(v8::Isolate *isolate)
{
	isolate->SetJitCodeEventHandler(v8::kJitCodeEventDefault, nullptr);
	if (opts_.stats)
		print_stats();
	std::lock_guard<std::mutex> ask(ask_lock_);
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
	if (is != isolates_.end()) {
		(*is)->context.Reset();
		isolates_.erase(is);
	}
}

void Agent::print_stats()
{
	std::lock_guard<std::mutex> guard(lock_);

	fprintf(stderr,
		"perfjit-node: loads=%llu moves=%llu overwritten=%llu errors=%llu "
		"with_lines=%llu live=%zu functions=%zu started_on_ask=%llu\n",
		static_cast<unsigned long long>(loads_), static_cast<unsigned long long>(moves_),
		static_cast<unsigned long long>(overwritten_),
		static_cast<unsigned long long>(errors_), static_cast<unsigned long long>(lines_),
		live_.size(), functions_.size(), static_cast<unsigned long long>(on_ask_));
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
	const int started = Agent::get().start(context, why);

	if (started < 0)
		fprintf(stderr, "perfjit-node: %s; JIT code is not announced\n", why.c_str());
	// Once per isolate: Node refuses the same cleanup hook twice.
	if (!started)
		node::AddEnvironmentCleanupHook(
			isolate,
			[](void *arg) { Agent::get().stop(static_cast<v8::Isolate *>(arg)); },
			isolate);
	NODE_SET_METHOD(exports, "stats", stats);
}
