// SPDX-License-Identifier: LGPL-2.1-or-later
//
// libperfjit-jvmti.so: a JVMTI agent that announces the code a JVM
// compiles through libperfjit, so that perf names Java methods with no
// perf inject step:
//
//   java -agentpath:/path/libperfjit-jvmti.so[=OPTIONS] ...
//   jcmd PID JVMTI.agent_load /path/libperfjit-jvmti.so [OPTIONS]
//
// Each compiled method is a code region of its own, each compilation of a
// method a new generation (a build-id of its own). Its side file has the
// method's Java source lines and what the compiler inlined into it, so
// perf annotate shows Java lines and perf report --inline the inlined
// frames. Interpreter, stubs and adapters are regions with their names.
//
// OPTIONS, comma-separated:
//   sig=params   java.util.HashMap.getNode(Object) (the default)
//   sig=full     java.util.HashMap.getNode(java.lang.Object)
//   sig=none     java.util.HashMap.getNode
//   gen=none     generations share the name (the default): perf report
//                --sort generation tells them apart, and so do their DSOs
//   gen=name     a recompiled method's name ends with " [gen N]"
//   inline=0     no inlining in the side files
//   lines=0      no source file names and line tables (the JVMTI
//                capabilities are not asked for); the agent also goes on
//                without them when the JVM refuses them
//   stats=1      print the agent's counters when the JVM exits
//   events=ask   no code events until a recorder asks for the JVM's code
//                (the default): the JVM then reports the code that exists
//                (GenerateEvents), announced as live from before, and each
//                compile from then on. At once when a recorder watches
//                from the start (perf record -- java), and in the modes
//                that write files (perf-map, jitdump). HotSpot records PCs
//                between safepoints only while the events are on: code
//                compiled before the ask has finer lines and inlining
//                with -XX:+DebugNonSafepoints
//   events=load  code events from the start: a method's generations count
//                its compiles before the first recorder too
//   mode=auto|code-region|perf-map|jitdump  (libperfjit's modes)
//   dir=PATH     the build-id cache for side files ($PERF_BUILDID_DIR,
//                else ~/.debug)
//   max_dir=SIZE a bound for the side files there (bytes, or with K, M or
//                G): the oldest go first, never one of live code; 256M by
//                default, max_dir=none for no bound
#include <jvmti.h>
#include <jvmticmlr.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent_log.hpp"
#include "agent_options.hpp"
#include "perfjit.hpp"

namespace
{

enum class Signatures { none, params, full };

struct Options : perfjit::agent::CommonOptions {
	Signatures sig = Signatures::params;
	bool generation_names = false;
	bool inlining = true;
	bool events_at_load = false;
};

void warn(const char *fmt, const std::string &arg)
{
	fprintf(stderr, "libperfjit-jvmti: ");
	fprintf(stderr, fmt, arg.c_str());
	fputc('\n', stderr);
}

std::optional<Options> parse_options(const char *text)
{
	Options o;
	auto bad = perfjit::agent::for_each_option(
		text, [&o](const std::string &key, const std::string &val) {
			if (key == "sig" && (val == "params" || val == "full" || val == "none"))
				o.sig = val == "params" ? Signatures::params
					: val == "full" ? Signatures::full
							: Signatures::none;
			else if (key == "gen" && (val == "name" || val == "none"))
				o.generation_names = val == "name";
			else if (key == "inline" && (val == "0" || val == "1"))
				o.inlining = val == "1";
			else if (key == "events" && (val == "ask" || val == "load"))
				o.events_at_load = val == "load";
			else
				return perfjit::agent::parse_common(key, val, o);
			return true;
		});
	if (bad) {
		warn("unknown option '%s' (see the comment at the top of agent.cpp)", *bad);
		return std::nullopt;
	}
	return o;
}

// Memory the JVM allocated for a result, given back when done.
template <typename T>
class JvmtiMem
{
public:
	explicit JvmtiMem(jvmtiEnv *env) : env_(env) {}
	~JvmtiMem()
	{
		if (p_)
			env_->Deallocate(reinterpret_cast<unsigned char *>(p_));
	}
	JvmtiMem(const JvmtiMem &) = delete;
	JvmtiMem &operator=(const JvmtiMem &) = delete;
	T **out() { return &p_; }
	T *get() const { return p_; }

private:
	jvmtiEnv *env_;
	T *p_ = nullptr;
};

// "Ljava/util/HashMap;" -> "java.util.HashMap"; "[I" -> "int[]".
// @simple drops the package. Advances @p past the type.
std::string java_type(const char *&p, bool simple)
{
	int dims = 0;
	std::string t;

	while (*p == '[') {
		dims++;
		p++;
	}
	switch (*p) {
	case 'B':
		t = "byte";
		break;
	case 'C':
		t = "char";
		break;
	case 'D':
		t = "double";
		break;
	case 'F':
		t = "float";
		break;
	case 'I':
		t = "int";
		break;
	case 'J':
		t = "long";
		break;
	case 'S':
		t = "short";
		break;
	case 'Z':
		t = "boolean";
		break;
	case 'V':
		t = "void";
		break;
	case 'L': {
		const char *end = strchr(p, ';');
		if (!end)
			end = p + strlen(p) - 1;
		t.assign(p + 1, end);
		std::replace(t.begin(), t.end(), '/', '.');
		if (simple && t.rfind('.') != std::string::npos)
			t = t.substr(t.rfind('.') + 1);
		p = end;
		break;
	}
	default:
		// Not a descriptor the JVM verified: step over it.
		if (*p)
			p++;
		return "?";
	}
	if (*p)
		p++;
	while (dims--)
		t += "[]";
	return t;
}

std::string class_name(const char *sig)
{
	const char *p = sig;

	return java_type(p, false);
}

// What perf shows for a method: class, name and, as chosen, its parameters.
std::string method_name(const char *klass, const char *name, const char *sig, Signatures how)
{
	std::string s = class_name(klass) + "." + name;

	if (how == Signatures::none || !sig || *sig != '(')
		return s;
	s += '(';
	for (const char *p = sig + 1; *p && *p != ')';) {
		if (s.back() != '(')
			s += ", ";
		s += java_type(p, how == Signatures::params);
	}
	return s + ')';
}

// What a method's code is named by, read from the JVM at each compile of
// it: its class may have been redefined since the last one, and state kept
// for every method ever compiled would grow without bound.
struct MethodInfo {
	std::string name;
	std::string source;				   // "java/util/HashMap.java", or empty
	std::vector<std::pair<jlocation, uint32_t>> lines; // bci, line: sorted

	uint32_t line_at(jint bci) const
	{
		auto it = std::upper_bound(lines.begin(), lines.end(),
					   std::make_pair(static_cast<jlocation>(bci), UINT32_MAX));
		return it == lines.begin() ? 0 : std::prev(it)->second;
	}
};

class Agent
{
public:
	static std::atomic<Agent *> instance;

	Agent(jvmtiEnv *jvmti, Options opts) : jvmti_(jvmti), opts_(std::move(opts)) {}
	int start(JavaVM *vm, bool live);
	void vm_init(JNIEnv *jni);
	void compiled(jmethodID method, jint size, const void *addr, jint map_len,
		      const jvmtiAddrLocationMap *map, const void *info);
	void unloaded(jmethodID method, const void *addr);
	void generated(const char *name, const void *addr, jint len);
	void stop();

private:
	MethodInfo describe(jmethodID id) const;
	bool claim(const void *addr, jmethodID owner, jint size);
	int load(perfjit_code &code, jmethodID owner);
	uint32_t next_generation(jmethodID id);
	void print_stats();
	int enable_events(bool replay);
	int start_asker(JNIEnv *jni);
	void asked();
	void ask_loop();

	jvmtiEnv *jvmti_;
	Options opts_;
	bool can_lines_ = false; // the JVM gave the source and line capabilities
	// Shared by the callbacks, which JVM threads run at once; stop()
	// takes it alone to close the session.
	std::shared_mutex session_lock_;
	// What the library reports from its thread; outlives the session.
	perfjit::agent::StderrLog log_{"libperfjit-jvmti"};
	std::unique_ptr<perfjit::Session> session_;
	// Who owns the code at each address, for CompiledMethodUnload: the
	// JVM posts it from another thread, after the address may already
	// hold new code. @stale counts the unloads still to come for code
	// that new code replaced. Entries live as long as their code.
	struct Owner {
		jmethodID method = nullptr; // nullptr: stubs, which have no unload
		jint size = 0;
		unsigned stale = 0;
	};
	std::mutex owners_lock_;
	std::unordered_map<const void *, Owner> owners_;
	// While GenerateEvents replays the code compiled before an attach or
	// the first ask: the JVM may report code twice, live and replayed.
	std::atomic<bool> replaying_{false};
	// How many times each method with live code, or whose class lives,
	// was compiled: its next generation. Dropped when its code is
	// unloaded with its class.
	std::mutex generations_lock_;
	std::unordered_map<jmethodID, uint32_t> generations_;
	// The counters that stats=1 prints.
	std::atomic<uint64_t> loads_{0}, unloads_{0}, replayed_{0}, classes_gone_{0};
	// The code events, on from the start or from the first ask; an ask
	// before then wakes the agent's thread (ask_loop()), which turns them
	// on: the library's thread that calls on_asked is not the JVM's.
	std::mutex events_lock_;
	std::atomic<bool> events_on_{false};
	std::mutex ask_lock_;
	std::condition_variable ask_cv_;
	bool ask_pending_ = false, quit_ = false;
	std::atomic<uint64_t> on_ask_{0};
};

std::atomic<Agent *> Agent::instance{nullptr};

MethodInfo Agent::describe(jmethodID id) const
{
	MethodInfo m;
	jclass klass = nullptr;
	JvmtiMem<char> name(jvmti_), sig(jvmti_), ksig(jvmti_), source(jvmti_);
	if (jvmti_->GetMethodName(id, name.out(), sig.out(), nullptr) != JVMTI_ERROR_NONE ||
	    jvmti_->GetMethodDeclaringClass(id, &klass) != JVMTI_ERROR_NONE ||
	    jvmti_->GetClassSignature(klass, ksig.out(), nullptr) != JVMTI_ERROR_NONE) {
		m.name = "java.unknown";
		return m;
	}
	m.name = method_name(ksig.get(), name.get(), sig.get(), opts_.sig);
	if (can_lines_ && jvmti_->GetSourceFileName(klass, source.out()) == JVMTI_ERROR_NONE) {
		// The package's directory, as in the JDK's src.zip and a source tree.
		std::string k = ksig.get() + 1;
		const size_t slash = k.rfind('/');
		m.source =
			(slash == std::string::npos ? "" : k.substr(0, slash + 1)) + source.get();
	}
	jint n = 0;
	JvmtiMem<jvmtiLineNumberEntry> table(jvmti_);
	if (!m.source.empty() &&
	    jvmti_->GetLineNumberTable(id, &n, table.out()) == JVMTI_ERROR_NONE) {
		for (jint i = 0; i < n; i++)
			m.lines.emplace_back(table.get()[i].start_location,
					     static_cast<uint32_t>(table.get()[i].line_number));
		std::sort(m.lines.begin(), m.lines.end());
	}
	return m;
}

uint32_t Agent::next_generation(jmethodID id)
{
	std::lock_guard<std::mutex> guard(generations_lock_);

	return generations_[id]++;
}

// Takes the address for new code of @owner: false for a replayed report
// of code announced already (same address, owner and size), which gets no
// new generation. Code still there whose unload the JVM has yet to post is
// replaced, and that unload, when it comes, is not for the new code.
bool Agent::claim(const void *addr, jmethodID owner, jint size)
{
	std::lock_guard<std::mutex> guard(owners_lock_);
	auto it = owners_.find(addr);

	if (it != owners_.end() && replaying_.load() && it->second.method == owner &&
	    it->second.size == size) {
		replayed_++;
		return false;
	}
	Owner &o = owners_[addr];
	if (o.method)
		o.stale++;
	o.method = owner;
	o.size = size;
	return true;
}

// Announces @code, claimed by claim(): without the owners' lock, which
// the callbacks' threads share, as the library copies the code.
int Agent::load(perfjit_code &code, jmethodID owner)
{
	std::shared_lock<std::shared_mutex> guard(session_lock_);

	if (!session_)
		return -ESHUTDOWN;
	std::error_code err = session_->load(code);
	// Code freed without an event (stubs and adapters have none), or
	// whose unload the JVM has yet to post: the new code replaces it.
	if (err == perfjit::make_error(-EEXIST)) {
		session_->unload(code.addr);
		err = session_->load(code);
	}
	if (err) {
		std::lock_guard<std::mutex> owners(owners_lock_);
		auto it = owners_.find(code.addr);

		if (it != owners_.end() && it->second.method == owner && !it->second.stale)
			owners_.erase(it);
		return -err.value();
	}
	loads_++;
	return 0;
}

// One compiled method: a region named by the method and its generation,
// with Java lines and the inlined methods from the compiler's PC records.
void Agent::compiled(jmethodID id, jint size, const void *addr, jint map_len,
		     const jvmtiAddrLocationMap *map, const void *info)
{
	struct Step {
		uint64_t offset;
		std::vector<std::pair<jmethodID, jint>> frames; // outermost first
	};
	std::vector<Step> steps;

	for (auto *h = static_cast<const jvmtiCompiledMethodLoadRecordHeader *>(info); h;
	     h = h->next) {
		if (h->kind != JVMTI_CMLR_INLINE_INFO)
			continue;
		const auto *rec = reinterpret_cast<const jvmtiCompiledMethodLoadInlineRecord *>(h);
		for (jint i = 0; i < rec->numpcs; i++) {
			const PCStackInfo &pc = rec->pcinfo[i];
			const auto off = static_cast<uint64_t>(static_cast<const char *>(pc.pc) -
							       static_cast<const char *>(addr));
			if (off >= static_cast<uint64_t>(size) || pc.numstackframes < 1)
				continue;
			Step s{off, {}};
			for (jint f = pc.numstackframes - 1; f >= 0; f--)
				s.frames.emplace_back(pc.methods[f], pc.bcis[f]);
			steps.push_back(std::move(s));
		}
	}
	if (steps.empty()) {
		// No compiler records: the address map, of the method alone.
		for (jint i = 0; map && i < map_len; i++) {
			const auto off = static_cast<uint64_t>(
				static_cast<const char *>(map[i].start_address) -
				static_cast<const char *>(addr));
			if (off < static_cast<uint64_t>(size))
				steps.push_back({off, {{id, static_cast<jint>(map[i].location)}}});
		}
	}
	std::stable_sort(steps.begin(), steps.end(),
			 [](const Step &a, const Step &b) { return a.offset < b.offset; });

	if (!claim(addr, id, size))
		return;
	// The methods of this compile, each read from the JVM once.
	std::unordered_map<jmethodID, MethodInfo> known;
	auto method = [&](jmethodID m) -> const MethodInfo & {
		auto it = known.find(m);
		return it != known.end() ? it->second : known.emplace(m, describe(m)).first->second;
	};

	std::string name, source;
	uint32_t generation;
	std::vector<perfjit_line> lines;
	std::vector<perfjit_inline> inlines;
	std::vector<std::string> strings; // what inlines point into
	{
		const MethodInfo &m = method(id);

		generation = next_generation(id);
		name = m.name;
		if (generation && opts_.generation_names)
			name += " [gen " + std::to_string(generation) + "]";
		source = m.source;

		// A PC record holds for the code after the record before it, up
		// to and including its own pc (HotSpot's PcDesc lookup): a return
		// address, what a call chain has, is its call's record. An
		// inlined call stays open while the records that follow have it,
		// called from the same place, at the same depth.
		std::vector<std::pair<jmethodID, jint>> open; // callee, caller's bci
		std::vector<size_t> open_at;		      // index in inlines
		uint64_t next = 0;			      // where the next record's code starts
		jmethodID last_inner = nullptr;
		for (const Step &step : steps) {
			if (step.frames.front().first != id || step.offset < next)
				continue; // not this method's scope, or a repeated pc
			Step s{next, step.frames};
			next = step.offset + 1;
			const size_t depth = opts_.inlining ? s.frames.size() - 1 : 0;
			size_t keep = 0;
			while (keep < open.size() && keep < depth &&
			       open[keep] == std::make_pair(s.frames[keep + 1].first,
							    s.frames[keep].second))
				keep++;
			for (size_t d = keep; d < open.size(); d++)
				inlines[open_at[d]].end = s.offset;
			open.resize(keep);
			open_at.resize(keep);
			for (size_t d = keep; d < depth; d++) {
				const MethodInfo &callee = method(s.frames[d + 1].first);
				const MethodInfo &caller = method(s.frames[d].first);

				open.emplace_back(s.frames[d + 1].first, s.frames[d].second);
				open_at.push_back(inlines.size());
				strings.push_back(callee.name);
				strings.push_back(callee.source);
				inlines.push_back({s.offset, 0, nullptr, nullptr,
						   caller.line_at(s.frames[d].second),
						   static_cast<uint32_t>(d + 1)});
			}
			// The line of the innermost frame shown, in its own file.
			const auto &inner = s.frames[depth];
			const uint32_t line = method(inner.first).line_at(inner.second);
			if (!line)
				continue;
			// Another method's code starts a row even on the same
			// line number: the row's file is that method's.
			if (lines.empty() || lines.back().line != line || last_inner != inner.first)
				lines.push_back({s.offset, line, 0});
			last_inner = inner.first;
		}
		// The code after the last record (stubs, handlers) is nobody's.
		for (size_t at : open_at)
			inlines[at].end = std::min<uint64_t>(next, static_cast<uint64_t>(size));
	}
	// Ranges closed where they opened are empty.
	std::vector<perfjit_inline> kept;
	for (size_t i = 0; i < inlines.size(); i++) {
		inlines[i].name = strings[2 * i].c_str();
		inlines[i].file = strings[2 * i + 1].empty() ? nullptr : strings[2 * i + 1].c_str();
		if (inlines[i].start < inlines[i].end)
			kept.push_back(inlines[i]);
	}

	perfjit_code code{};
	code.size = sizeof(code);
	code.generation = generation;
	code.name = name.c_str();
	code.addr = addr;
	code.len = static_cast<size_t>(size);
	if (!source.empty() && !lines.empty()) {
		code.source_file = source.c_str();
		code.lines = lines.data();
		code.nr_lines = lines.size();
	}
	code.inlines = kept.data();
	code.nr_inlines = kept.size();
	int err = load(code, id);
	if (err == -EINVAL && code.nr_inlines) {
		// Records the library refuses (ranges that do not nest): the
		// method is still worth its name and lines.
		code.inlines = nullptr;
		code.nr_inlines = 0;
		err = load(code, id);
	}
	if (err && err != -ESHUTDOWN)
		warn("cannot announce %s", name + ": " + perfjit_strerror(err));
}

void Agent::unloaded(jmethodID method, const void *addr)
{
	{
		std::shared_lock<std::shared_mutex> guard(session_lock_);
		// Under the owners' lock: new code at @addr waits for the unload.
		std::lock_guard<std::mutex> owners(owners_lock_);
		auto it = owners_.find(addr);

		if (!session_ || it == owners_.end())
			return;
		if (it->second.stale) {
			// The code this unload is for was replaced already.
			it->second.stale--;
			return;
		}
		if (it->second.method != method)
			return;
		session_->unload(addr);
		owners_.erase(it);
		unloads_++;
	}
	// Code unloaded with its class: the method is gone, and so is its
	// generation count (the JVM clears the method's ID with its class).
	jclass klass = nullptr;
	if (jvmti_->GetMethodDeclaringClass(method, &klass) == JVMTI_ERROR_INVALID_METHODID) {
		std::lock_guard<std::mutex> guard(generations_lock_);

		if (generations_.erase(method))
			classes_gone_++;
	}
}

void Agent::generated(const char *name, const void *addr, jint len)
{
	perfjit_code code{};

	if (!name || !addr || len <= 0)
		return;
	if (!claim(addr, nullptr, len))
		return;
	code.size = sizeof(code);
	code.name = name;
	code.addr = addr;
	code.len = static_cast<size_t>(len);
	const int err = load(code, nullptr);
	if (err && err != -ESHUTDOWN)
		warn("cannot announce %s", std::string(name) + ": " + perfjit_strerror(err));
}

void Agent::print_stats()
{
	size_t owners, generations;
	{
		std::lock_guard<std::mutex> guard(owners_lock_);
		owners = owners_.size();
	}
	{
		std::lock_guard<std::mutex> guard(generations_lock_);
		generations = generations_.size();
	}
	fprintf(stderr,
		"libperfjit-jvmti: stats: %zu regions live, %zu methods counted, %llu loads, "
		"%llu unloads, %llu replayed loads ignored, %llu methods gone with their class, "
		"%llu events on ask\n",
		owners, generations, static_cast<unsigned long long>(loads_.load()),
		static_cast<unsigned long long>(unloads_.load()),
		static_cast<unsigned long long>(replayed_.load()),
		static_cast<unsigned long long>(classes_gone_.load()),
		static_cast<unsigned long long>(on_ask_.load()));
}

void Agent::stop()
{
	{
		std::lock_guard<std::mutex> ask(ask_lock_);

		quit_ = true;
	}
	ask_cv_.notify_all();
	std::unique_lock<std::shared_mutex> guard(session_lock_);

	if (session_ && opts_.stats)
		print_stats();
	// perfjit_close() waits for the side files still pending.
	session_.reset();
}

void JNICALL on_compiled_method_load(jvmtiEnv *, jmethodID method, jint size, const void *addr,
				     jint map_len, const jvmtiAddrLocationMap *map,
				     const void *info)
{
	try {
		if (Agent *a = Agent::instance.load())
			a->compiled(method, size, addr, map_len, map, info);
	} catch (...) {
		// Out of memory: this method stays unnamed.
	}
}

void JNICALL on_compiled_method_unload(jvmtiEnv *, jmethodID method, const void *addr)
{
	try {
		if (Agent *a = Agent::instance.load())
			a->unloaded(method, addr);
	} catch (...) {
	}
}

void JNICALL on_dynamic_code(jvmtiEnv *, const char *name, const void *addr, jint len)
{
	try {
		if (Agent *a = Agent::instance.load())
			a->generated(name, addr, len);
	} catch (...) {
	}
}

void JNICALL on_vm_death(jvmtiEnv *, JNIEnv *)
{
	if (Agent *a = Agent::instance.load())
		a->stop();
}

void JNICALL on_vm_init(jvmtiEnv *, JNIEnv *jni, jthread)
{
	try {
		if (Agent *a = Agent::instance.load())
			a->vm_init(jni);
	} catch (...) {
	}
}

constexpr jvmtiEvent kCodeEvents[] = {JVMTI_EVENT_COMPILED_METHOD_LOAD,
				      JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
				      JVMTI_EVENT_DYNAMIC_CODE_GENERATED};

// The code events: CompiledMethodLoad and its unload, DynamicCodeGenerated.
// With @replay, the JVM then reports the code that exists (GenerateEvents),
// as an attach or the first ask needs: code that the live events report
// meanwhile comes twice, and claim() takes the replay for what it is. That
// code ran before: once a recorder asked, it is announced again as a
// rundown, live from before, so that the recorder names the samples it
// took while it waited.
int Agent::enable_events(bool replay)
{
	std::lock_guard<std::mutex> guard(events_lock_);

	if (events_on_)
		return JNI_OK;
	for (jvmtiEvent e : kCodeEvents) {
		if (jvmti_->SetEventNotificationMode(JVMTI_ENABLE, e, nullptr) !=
		    JVMTI_ERROR_NONE) {
			for (jvmtiEvent on : kCodeEvents)
				jvmti_->SetEventNotificationMode(JVMTI_DISABLE, on, nullptr);
			return JNI_ERR;
		}
	}
	events_on_ = true;
	if (!replay)
		return JNI_OK;
	replaying_ = true;
	for (jvmtiEvent e :
	     {JVMTI_EVENT_DYNAMIC_CODE_GENERATED, JVMTI_EVENT_COMPILED_METHOD_LOAD}) {
		const jvmtiError err = jvmti_->GenerateEvents(e);

		// (The JVM is going away: nothing to say.)
		if (err != JVMTI_ERROR_NONE && err != JVMTI_ERROR_WRONG_PHASE)
			warn("%s", "the code compiled before is not named (JVMTI error " +
					   std::to_string(err) + ")");
	}
	replaying_ = false;
	std::shared_lock<std::shared_mutex> session(session_lock_);

	if (session_ && session_->asked() == 1)
		(void)session_->rundown();
	return JNI_OK;
}

// The library's thread: a recorder asked for the process's code. Until the
// events are on, the agent's thread turns them on.
void Agent::asked()
{
	if (events_on_)
		return;
	{
		std::lock_guard<std::mutex> guard(ask_lock_);

		ask_pending_ = true;
	}
	ask_cv_.notify_all();
}

// The agent's thread (a JVMTI agent thread, so that it may call JVMTI):
// waits for the first ask, then turns the events on, with a replay. Later
// asks get the library's rundowns alone.
void Agent::ask_loop()
{
	{
		std::unique_lock<std::mutex> guard(ask_lock_);

		ask_cv_.wait(guard, [this] { return quit_ || ask_pending_; });
		if (quit_)
			return;
	}
	if (enable_events(true) == JNI_OK)
		on_ask_++;
	else if (!quit_)
		warn("%s", "cannot turn on the JVM's code events: nothing is named");
}

int Agent::start_asker(JNIEnv *jni)
{
	jclass cls = jni->FindClass("java/lang/Thread");
	jmethodID init = cls ? jni->GetMethodID(cls, "<init>", "(Ljava/lang/String;)V") : nullptr;
	jstring name = init ? jni->NewStringUTF("libperfjit-jvmti") : nullptr;
	jobject thread = name ? jni->NewObject(cls, init, name) : nullptr;
	jvmtiError err = JVMTI_ERROR_INTERNAL;

	if (thread)
		err = jvmti_->RunAgentThread(
			thread,
			[](jvmtiEnv *, JNIEnv *, void *arg) {
				try {
					static_cast<Agent *>(arg)->ask_loop();
				} catch (...) {
				}
			},
			this, JVMTI_THREAD_NORM_PRIORITY);
	if (jni->ExceptionCheck())
		jni->ExceptionClear();
	for (jobject ref : {static_cast<jobject>(cls), static_cast<jobject>(name), thread}) {
		if (ref)
			jni->DeleteLocalRef(ref);
	}
	return err == JVMTI_ERROR_NONE ? JNI_OK : JNI_ERR;
}

// The JVM is up (-agentpath): the agent's thread can start, or, should it
// not, the events go on now.
void Agent::vm_init(JNIEnv *jni)
{
	if (events_on_ || start_asker(jni) == JNI_OK)
		return;
	if (enable_events(true) == JNI_OK)
		warn("%s", "no thread of its own: the JVM's code events are on from now");
	else
		warn("%s", "cannot turn on the JVM's code events: nothing is named");
}

// Until a recorder asks for the JVM's code, no code events (events=ask):
// with them the JVM reports each compile, and the agent reads the method's
// names, lines and inlining and the library keeps a copy of its code,
// about 3% of the bench's JVM run with nobody recording. They are on at
// once when a recorder watches the JVM already (perf record -- java), the
// mode writes files (perf-map, jitdump, or auto on a kernel without code
// regions), or events=load.
int Agent::start(JavaVM *vm, bool live)
{
	jvmtiCapabilities caps{};
	caps.can_generate_compiled_method_load_events = 1;
	if (jvmti_->AddCapabilities(&caps) != JVMTI_ERROR_NONE) {
		warn("%s", "the JVM cannot report compiled methods");
		return JNI_ERR;
	}
	// Optional: without them, methods are named without source lines.
	if (opts_.lines) {
		jvmtiCapabilities lines{};
		lines.can_get_source_file_name = 1;
		lines.can_get_line_numbers = 1;
		can_lines_ = jvmti_->AddCapabilities(&lines) == JVMTI_ERROR_NONE;
		if (!can_lines_)
			warn("%s",
			     "the JVM gives no line numbers: methods are named without lines");
	}

	perfjit_options po{};
	po.size = sizeof(po);
	po.mode = opts_.mode;
	po.fallback = PERFJIT_MODE_PERF_MAP;
	po.buildid_dir = opts_.dir.empty() ? nullptr : opts_.dir.c_str();
	po.max_dir_bytes = opts_.max_dir;
	po.on_asked = [](void *arg) {
		try {
			static_cast<Agent *>(arg)->asked();
		} catch (...) {
		}
	};
	po.on_asked_arg = this;
	log_.attach(po);
	auto session = std::make_unique<perfjit::Session>(&po);
	if (!session->ok()) {
		warn("%s", "cannot open a libperfjit session: " + session->error().message());
		return JNI_ERR;
	}
	session_ = std::move(session);

	jvmtiEventCallbacks cb{};
	cb.CompiledMethodLoad = on_compiled_method_load;
	cb.CompiledMethodUnload = on_compiled_method_unload;
	cb.DynamicCodeGenerated = on_dynamic_code;
	cb.VMDeath = on_vm_death;
	cb.VMInit = on_vm_init;
	if (jvmti_->SetEventCallbacks(&cb, sizeof(cb)) != JVMTI_ERROR_NONE ||
	    jvmti_->SetEventNotificationMode(JVMTI_ENABLE, JVMTI_EVENT_VM_DEATH, nullptr) !=
		    JVMTI_ERROR_NONE)
		return JNI_ERR;
	// Loaded into a running JVM, the code compiled before is reported
	// when the events go on; later recorders get the library's rundown
	// of all of it.
	if (opts_.events_at_load || session_->mode() != PERFJIT_MODE_CODE_REGION ||
	    session_->asked() == 1)
		return enable_events(live);
	if (!live)
		return jvmti_->SetEventNotificationMode(JVMTI_ENABLE, JVMTI_EVENT_VM_INIT,
							nullptr) == JVMTI_ERROR_NONE
			       ? JNI_OK
			       : JNI_ERR;
	JNIEnv *jni = nullptr;
	if (vm->GetEnv(reinterpret_cast<void **>(&jni), JNI_VERSION_1_6) == JNI_OK &&
	    start_asker(jni) == JNI_OK)
		return JNI_OK;
	warn("%s", "no thread of its own: the JVM's code events are on from now");
	return enable_events(true);
}

jint start_agent(JavaVM *vm, const char *options, bool live)
{
	static std::mutex once;
	std::lock_guard<std::mutex> guard(once);

	if (Agent::instance.load()) {
		warn("%s", "already loaded; the second load is ignored");
		return JNI_OK;
	}
	auto opts = parse_options(options);
	if (!opts)
		return JNI_ERR;
	jvmtiEnv *jvmti = nullptr;
	if (vm->GetEnv(reinterpret_cast<void **>(&jvmti), JVMTI_VERSION_1_2) != JNI_OK) {
		warn("%s", "no JVMTI 1.2 in this JVM");
		return JNI_ERR;
	}
	try {
		// Lives as long as the JVM: callbacks may come until it exits.
		auto agent = std::make_unique<Agent>(jvmti, std::move(*opts));
		Agent::instance = agent.get();
		// Never freed, also when it fails: once events are enabled, a
		// JVM thread may be in a callback.
		Agent *a = agent.release();
		if (a->start(vm, live) != JNI_OK) {
			for (jvmtiEvent e : kCodeEvents)
				jvmti->SetEventNotificationMode(JVMTI_DISABLE, e, nullptr);
			for (jvmtiEvent e : {JVMTI_EVENT_VM_DEATH, JVMTI_EVENT_VM_INIT})
				jvmti->SetEventNotificationMode(JVMTI_DISABLE, e, nullptr);
			a->stop();
			// A later attach starts afresh, with an environment of its own.
			Agent::instance = nullptr;
			jvmti->DisposeEnvironment();
			return JNI_ERR;
		}
	} catch (...) {
		Agent::instance = nullptr;
		return JNI_ERR;
	}
	return JNI_OK;
}

} // namespace

extern "C" {

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *)
{
	return start_agent(vm, options, false);
}

JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM *vm, char *options, void *)
{
	return start_agent(vm, options, true);
}

JNIEXPORT void JNICALL Agent_OnUnload(JavaVM *)
{
	if (Agent *a = Agent::instance.load())
		a->stop();
}

} // extern "C"
