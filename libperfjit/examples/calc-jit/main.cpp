// SPDX-License-Identifier: LGPL-2.1-or-later
// perfjit-calc: a tiny expression-language JIT that announces its code through libperfjit.
//
// Phases: (1) compile N functions (generation 0), announcing them B at a time with
// perfjit_load_many(), as a runtime loading a module would; (2) run the hot set, the first
// min(N, 8) functions, round-robin for S/2 seconds; (3) recompile each hot function with the
// optimizing tier: announce the new code as generation 1, then unload and free the old, whose
// memory the JIT's allocator hands to the next hot function's new code, so that one address
// holds two functions in turn; (4) unload and free every third function outside the hot set;
// (5) run the hot set for S/2 seconds more; (6) close the session. Then print the truth table
// and a summary.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <time.h>
#include <vector>

#include "ast.h"
#include "codegen.h"
#include "parser.h"
#include "session.h"

namespace calc
{
namespace
{

using Clock = std::chrono::steady_clock;
using Micros = std::chrono::duration<double, std::micro>;
using Millis = std::chrono::duration<double, std::milli>;

constexpr size_t max_hot = 8;
constexpr size_t max_functions = 10'000'000;
constexpr const char *program_name = "perfjit-calc";

class Failure : public std::runtime_error
{
public:
	using std::runtime_error::runtime_error;
};

struct UsageError : public std::runtime_error {
	using std::runtime_error::runtime_error;
};

struct Options {
	std::string program; // empty: the default program
	std::optional<size_t> functions;
	double seconds = 2.0;
	uint64_t iterations = 200000;
	size_t batch = 64;
	uint32_t mode = PERFJIT_MODE_AUTO;
	uint32_t fallback = PERFJIT_MODE_PERF_MAP;
	bool verify = false;
	bool help = false;
	Frame frame = Frame::pointer;
	Protection protection = Protection::rwx;
};

void print_usage(std::FILE *out)
{
	std::fprintf(out, "usage: %s [options]\n", program_name);
	std::fputs(
		"  --program FILE     the program to compile (default: the demo program.calc)\n"
		"  --functions N      compile N functions, instantiating the program's\n"
		"                     functions repeatedly as <name>_<k> (default: all, once)\n"
		"  --seconds S        running time of the two hot phases together (default 2)\n"
		"  --iterations N     loop iterations per hot call (default 200000)\n"
		"  --batch B          announce the first compiles B at a time, in one side file\n"
		"                     (default 64; 1: each on its own)\n"
		"  --mode MODE        auto, code-region, perf-map or jitdump (default auto)\n"
		"  --fallback MODE    perf-map or jitdump: auto's fallback (default perf-map)\n"
		"  --verify           check every compiled function against an interpreter\n"
		"  --no-frame-pointer emit code that keeps no frame pointer and calls a native\n"
		"                     function on every iteration; describe its frames with\n"
		"                     DWARF CFI (.eh_frame), for perf record --call-graph dwarf\n"
		"  --wx               keep code writable or executable, never both: write each\n"
		"                     function's pages with PROT_READ|PROT_WRITE, then mprotect()\n"
		"                     them to PROT_READ|PROT_EXEC (default: RWX memory)\n"
		"  --help             show this help\n"
		"stdout: \"truth <name> <generation> <address> <length> <milliseconds> <from> "
		"<to>\"\n"
		"        lines: the hot code, the time spent in it, and the CLOCK_MONOTONIC\n"
		"        nanoseconds from its announcement to its unload (or the end);\n"
		"stderr: a one-line summary.\n",
		out);
}

uint64_t parse_unsigned(const std::string &option, const std::string &value, uint64_t min,
			uint64_t max)
{
	char *end = nullptr;
	errno = 0;
	const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
	if (value.empty() || value[0] < '0' || value[0] > '9' || *end != '\0' || errno == ERANGE ||
	    v < min || v > max)
		throw UsageError(option + ": expected an integer from " + std::to_string(min) +
				 " to " + std::to_string(max) + ", got \"" + value + "\"");
	return v;
}

double parse_seconds(const std::string &option, const std::string &value)
{
	char *end = nullptr;
	errno = 0;
	const double v = std::strtod(value.c_str(), &end);
	if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < 0 ||
	    v > 1e6)
		throw UsageError(option + ": expected a number of seconds, got \"" + value + "\"");
	return v;
}

uint32_t parse_mode(const std::string &option, const std::string &value, bool fallback)
{
	if (value == "perf-map")
		return PERFJIT_MODE_PERF_MAP;
	if (value == "jitdump")
		return PERFJIT_MODE_JITDUMP;
	if (!fallback && value == "auto")
		return PERFJIT_MODE_AUTO;
	if (!fallback && value == "code-region")
		return PERFJIT_MODE_CODE_REGION;
	throw UsageError(option + ": unknown mode \"" + value + "\"");
}

Options parse_options(int argc, char **argv)
{
	Options opts;
	for (int i = 1; i < argc; i++) {
		std::string arg = argv[i];
		std::optional<std::string> inline_value;
		if (const size_t eq = arg.find('=');
		    arg.rfind("--", 0) == 0 && eq != std::string::npos) {
			inline_value = arg.substr(eq + 1);
			arg.resize(eq);
		}
		const auto value = [&]() -> std::string {
			if (inline_value)
				return *inline_value;
			if (i + 1 >= argc)
				throw UsageError(arg + ": missing value");
			return argv[++i];
		};

		if (arg == "--verify" || arg == "--help" || arg == "-h" ||
		    arg == "--no-frame-pointer" || arg == "--wx") {
			if (inline_value)
				throw UsageError(arg + ": takes no value");
			if (arg == "--no-frame-pointer")
				opts.frame = Frame::cfi;
			else if (arg == "--wx")
				opts.protection = Protection::wx;
			else
				(arg == "--verify" ? opts.verify : opts.help) = true;
		} else if (arg == "--program") {
			opts.program = value();
		} else if (arg == "--functions") {
			opts.functions = parse_unsigned(arg, value(), 1, max_functions);
		} else if (arg == "--seconds") {
			opts.seconds = parse_seconds(arg, value());
		} else if (arg == "--iterations") {
			opts.iterations = parse_unsigned(arg, value(), 1, UINT64_MAX);
		} else if (arg == "--batch") {
			opts.batch = parse_unsigned(arg, value(), 1, max_functions);
		} else if (arg == "--mode") {
			opts.mode = parse_mode(arg, value(), false);
		} else if (arg == "--fallback") {
			opts.fallback = parse_mode(arg, value(), true);
		} else {
			throw UsageError("unknown argument \"" + arg + "\"");
		}
	}
	return opts;
}

// <bindir>/../share/perfjit/program.calc, where it is installed (and
// where the build tree has a copy).
std::string default_program()
{
	std::error_code ec;
	const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
	if (!ec) {
		const auto program =
			(exe.parent_path() / ".." / "share" / "perfjit" / "program.calc")
				.lexically_normal();
		if (std::filesystem::is_regular_file(program, ec))
			return program.string();
	}
	throw Failure("cannot find program.calc; use --program FILE");
}

// One generation of a function's code, as the truth table reports it.
struct Generation {
	uint32_t generation = 0;
	const void *addr = nullptr;
	size_t len = 0;
	double ms = 0;			 // wall-clock time spent in calls of this code
	uint64_t from_ns = 0, to_ns = 0; // announced, unloaded: CLOCK_MONOTONIC
};

// CLOCK_MONOTONIC, the clock of perf record -k 1, in nanoseconds.
uint64_t monotonic_ns()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct JitFunction {
	std::string name;
	const Function *source = nullptr;
	uint64_t salt = 0;
	JitCode code;
	Generation current;
	std::vector<Generation> retired;
	uint64_t x = 0; // the hot loop's state
};

perfjit_code describe(const JitFunction &fn, uint32_t generation, const CompiledFunction &compiled,
		      const std::string &source_file)
{
	perfjit_code code{};
	code.size = sizeof(code);
	code.generation = generation;
	code.name = fn.name.c_str();
	code.addr = compiled.code.addr();
	code.len = compiled.code.size();
	code.source_file = source_file.c_str();
	code.lines = compiled.lines.data();
	code.nr_lines = compiled.lines.size();
	code.eh_frame = compiled.eh_frame.empty() ? nullptr : compiled.eh_frame.data();
	code.eh_frame_len = compiled.eh_frame.size();
	return code;
}

// Announces @codes together: with code regions, in one side file.
void announce(perfjit_session *session, const std::vector<perfjit_code> &codes)
{
	std::vector<const perfjit_code *> ptrs;
	for (const auto &code : codes)
		ptrs.push_back(&code);
	check(perfjit_load_many(session, ptrs.data(), ptrs.size()), "perfjit_load_many",
	      codes.front().name);
}

void unload(perfjit_session *session, JitFunction &fn)
{
	check(perfjit_unload(session, fn.code.addr()), "perfjit_unload", fn.name.c_str());
	fn.current.to_ns = monotonic_ns();
	fn.code.reset();
}

void verify(const JitFunction &fn, const JitCode &code)
{
	static constexpr uint64_t inputs[] = {0, 1, 2, 0x7f, 0x123456789abcdef0, ~0ULL};
	for (const uint64_t x : inputs) {
		for (const uint64_t iterations : {0, 1, 3}) {
			const uint64_t got = code.entry()(x, iterations);
			const uint64_t want = interpret(*fn.source, fn.salt, x, iterations);
			if (got != want) {
				char message[256];
				std::snprintf(message, sizeof(message),
					      "%s generation %" PRIu32 ": f(0x%" PRIx64 ", %" PRIu64
					      ") = 0x%" PRIx64 ", expected 0x%" PRIx64,
					      fn.name.c_str(), fn.current.generation, x, iterations,
					      got, want);
				throw Failure(message);
			}
		}
	}
}

// Calls the hot functions round-robin, each with @iterations, until @seconds have passed
// (at least one round). Never inlined: it is the JIT code's caller in every call chain.
[[gnu::noinline]] void run_hot(std::vector<JitFunction> &fns, size_t nr_hot, double seconds,
			       uint64_t iterations)
{
	const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
						     std::chrono::duration<double>(seconds));
	do {
		for (size_t i = 0; i < nr_hot; i++) {
			JitFunction &fn = fns[i];
			const JitFn entry = fn.code.entry();
			const auto start = Clock::now();
			fn.x = entry(fn.x, iterations);
			fn.current.ms += Millis(Clock::now() - start).count();
		}
	} while (Clock::now() < deadline);
}

void print_truth(const JitFunction &fn, const Generation &g)
{
	std::printf("truth %s %" PRIu32 " 0x%" PRIxPTR " %zu %.3f %" PRIu64 " %" PRIu64 "\n",
		    fn.name.c_str(), g.generation, reinterpret_cast<uintptr_t>(g.addr), g.len, g.ms,
		    g.from_ns, g.to_ns);
}

int run(const Options &opts)
{
	const Program program =
		parse_program(opts.program.empty() ? default_program() : opts.program);
	const size_t nr_source = program.functions.size();
	const size_t nr_functions = opts.functions.value_or(nr_source);
	const size_t nr_hot = std::min(nr_functions, max_hot);

	// Destroyed in reverse: the session closes before the code is freed.
	Jit jit(opts.protection);
	std::vector<JitFunction> fns(nr_functions);

	perfjit_options popts{};
	popts.size = sizeof(popts);
	popts.mode = opts.mode;
	popts.fallback = opts.fallback;
	Session session = open_session(popts);
	const int mode = check(perfjit_mode(session.get()), "perfjit_mode");

	// (1) Compile every function; announce them a batch at a time.
	Clock::duration compile_time{};
	Clock::duration announce_time{};
	std::vector<CompiledFunction> pending;
	for (size_t i = 0; i < nr_functions; i++) {
		JitFunction &fn = fns[i];
		const size_t copy = i / nr_source;
		fn.source = &program.functions[i % nr_source];
		fn.salt = copy;
		fn.name =
			copy == 0 ? fn.source->name : fn.source->name + "_" + std::to_string(copy);
		fn.x = i + 1;

		const auto start = Clock::now();
		pending.push_back(jit.compile(*fn.source, fn.salt, Tier::baseline, opts.frame));
		compile_time += Clock::now() - start;
		if (opts.verify)
			verify(fn, pending.back().code);
		if (pending.size() < opts.batch && i + 1 < nr_functions)
			continue;

		const size_t first = i + 1 - pending.size();
		const auto announce_start = Clock::now();
		std::vector<perfjit_code> codes;
		for (size_t k = 0; k < pending.size(); k++)
			codes.push_back(describe(fns[first + k], 0, pending[k], program.path));
		announce(session.get(), codes);
		announce_time += Clock::now() - announce_start;
		const uint64_t now = monotonic_ns();
		for (size_t k = 0; k < pending.size(); k++) {
			JitFunction &f = fns[first + k];
			f.code = std::move(pending[k].code);
			f.current = Generation{0, f.code.addr(), f.code.size(), 0, now, 0};
		}
		pending.clear();
	}

	// (2) Run the hot set.
	run_hot(fns, nr_hot, opts.seconds / 2, opts.iterations);

	// (3) Recompile the hot set: announce the new code before the old goes away.
	for (size_t i = 0; i < nr_hot; i++) {
		JitFunction &fn = fns[i];
		CompiledFunction compiled =
			jit.compile(*fn.source, fn.salt, Tier::optimized, opts.frame);
		const uint32_t generation = fn.current.generation + 1;
		announce(session.get(), {describe(fn, generation, compiled, program.path)});
		const uint64_t now = monotonic_ns();
		if (opts.verify)
			verify(fn, compiled.code);
		unload(session.get(), fn);
		fn.retired.push_back(fn.current);
		fn.code = std::move(compiled.code);
		fn.current = Generation{generation, fn.code.addr(), fn.code.size(), 0, now, 0};
	}

	// (4) Free every third function outside the hot set.
	size_t nr_freed = 0;
	for (size_t i = nr_hot; i < nr_functions; i += 3) {
		unload(session.get(), fns[i]);
		nr_freed++;
	}

	// (5) Run the hot set again, in its new generation.
	run_hot(fns, nr_hot, opts.seconds / 2, opts.iterations);

	// (6) Close the session.
	session.reset();
	const uint64_t end = monotonic_ns();
	for (size_t i = 0; i < nr_hot; i++)
		fns[i].current.to_ns = end;

	for (size_t i = 0; i < nr_hot; i++) {
		for (const Generation &g : fns[i].retired)
			print_truth(fns[i], g);
		print_truth(fns[i], fns[i].current);
	}
	std::fflush(stdout);

	// How often the allocator put new hot code where other hot code had been.
	size_t nr_reused = 0;
	for (size_t i = 0; i < nr_hot; i++) {
		for (size_t j = 0; j < nr_hot; j++) {
			for (const Generation &g : fns[j].retired)
				nr_reused += g.addr == fns[i].current.addr;
		}
	}

	const double n = static_cast<double>(nr_functions);
	std::fprintf(stderr,
		     "%s: mode %s, %zu functions compiled, compile %.2f us/function, "
		     "announce %.2f us/function, %zu hot, %zu freed, %zu addresses reused\n",
		     program_name, mode_name(mode), nr_functions, Micros(compile_time).count() / n,
		     Micros(announce_time).count() / n, nr_hot, nr_freed, nr_reused);
	return std::ferror(stdout) ? 1 : 0;
}

} // namespace
} // namespace calc

int main(int argc, char **argv)
{
	using namespace calc;

	Options opts;
	try {
		opts = parse_options(argc, argv);
	} catch (const UsageError &e) {
		std::fprintf(stderr, "%s: %s\n", program_name, e.what());
		print_usage(stderr);
		return 2;
	} catch (const std::exception &e) {
		std::fprintf(stderr, "%s: %s\n", program_name, e.what());
		return 1;
	}
	if (opts.help) {
		print_usage(stdout);
		return 0;
	}

	try {
		return run(opts);
	} catch (const std::exception &e) {
		std::fprintf(stderr, "%s: %s\n", program_name, e.what());
	} catch (...) {
		std::fprintf(stderr, "%s: unknown error\n", program_name);
	}
	return 1;
}
