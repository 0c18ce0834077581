// SPDX-License-Identifier: LGPL-2.1-or-later
// perfjit-calc: x86-64 code generation with AsmJit, and the line tables of the code.
#ifndef PERFJIT_CALC_CODEGEN_H
#define PERFJIT_CALC_CODEGEN_H

#include <asmjit/x86.h>
#include <perfjit.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "ast.h"

namespace calc
{

// A compiled function: runs the body @iterations times, feeding each result back as x,
// and returns the last result (x itself if @iterations is 0).
using JitFn = uint64_t (*)(uint64_t x, uint64_t iterations);

// Baseline code evaluates every operand into rax through push/pop of temporaries;
// optimized code folds constant subtrees and uses immediate and register operands.
enum class Tier { baseline, optimized };

// How the code keeps its frame. pointer: it saves rbp and points it at its frame, so that
// frame-pointer unwinding walks through it, and describes no frame. cfi: it leaves rbp alone
// (rbp still holds the caller's frame), calls native_work() on every iteration, and
// describes its frame in DWARF call frame information (CompiledFunction::eh_frame), as
// JITs that omit frame pointers do.
enum class Frame { pointer, cfi };

// The native function that Frame::cfi code calls on every iteration: a little work of its
// own, so that samples fall in native code called from JIT code. Changes no result.
void native_work() noexcept;

class JitError : public std::runtime_error
{
public:
	using std::runtime_error::runtime_error;
};

// How the JIT keeps its code memory. rwx: writable and executable at once (AsmJit's
// JitRuntime). wx: writable or executable, never both, as hardened runtimes keep it: each
// compile makes the pages it writes PROT_READ|PROT_WRITE, writes, and mprotect()s them to
// PROT_READ|PROT_EXEC.
enum class Protection { rwx, wx };

class Jit;

// Executable code owned by a Jit, released when the JitCode dies or is reset.
class JitCode
{
public:
	JitCode() noexcept = default;
	JitCode(Jit &owner, void *mem, size_t size) noexcept
	    : owner_(&owner), mem_(mem), size_(size)
	{
	}
	JitCode(JitCode &&other) noexcept;
	JitCode &operator=(JitCode &&other) noexcept;
	JitCode(const JitCode &) = delete;
	JitCode &operator=(const JitCode &) = delete;
	~JitCode() { reset(); }

	void reset() noexcept;

	explicit operator bool() const noexcept { return mem_ != nullptr; }
	JitFn entry() const noexcept { return asmjit::ptr_as_func<JitFn>(mem_); }
	const void *addr() const noexcept { return mem_; }
	size_t size() const noexcept { return size_; }

private:
	Jit *owner_ = nullptr;
	void *mem_ = nullptr;
	size_t size_ = 0;
};

struct CompiledFunction {
	JitCode code;
	// Rows sorted by strictly increasing offset; each covers the code up to the next row
	// (the last one up to the end). line: Function::line; column: see Jit::compile().
	std::vector<perfjit_line> lines;
	// Frame::cfi: a CIE and an FDE for the code, pc-relative, as if placed at the first
	// 8-byte aligned address after the code (perfjit_code::eh_frame), which is where it is
	// also in memory, followed by room for its .eh_frame_hdr. Empty otherwise.
	std::vector<uint8_t> eh_frame;
};

// W^X code memory: one reserved mapping, allocated from its start, so that the executable
// pages stay one VMA, which the kernel records again at every mprotect() that makes pages
// executable. A freed block is reused for code of the same size.
class WxArena
{
public:
	WxArena();
	WxArena(const WxArena &) = delete;
	WxArena &operator=(const WxArena &) = delete;

	// Places @holder's code (flattened): the pages it writes are writable only while it
	// writes them. Throws JitError.
	void *add(asmjit::CodeHolder &holder);
	void release(void *mem) noexcept;

private:
	struct Unmap {
		size_t size;
		void operator()(uint8_t *base) const noexcept;
	};

	// Whether the pages of [mem, mem + size) could be made @prot.
	static bool protect(uint8_t *mem, size_t size, int prot) noexcept;

	std::unique_ptr<uint8_t, Unmap> base_;
	size_t used_ = 0;
	std::unordered_map<void *, size_t> sizes_; // live blocks
	std::multimap<size_t, uint8_t *> free_;	   // freed blocks, by size
};

// Compiles functions into one JitRuntime, or one WxArena; must outlive the code it made.
class Jit
{
public:
	explicit Jit(Protection protection = Protection::rwx);
	Jit(const Jit &) = delete;
	Jit &operator=(const Jit &) = delete;

	// Compiles @fn with @salt added to the body's value on every iteration (0: nothing added).
	// The line table attributes the prologue, loop control, epilogue and salt to the column of
	// "fn", the code that loads a literal or the parameter to its column, and the code of a
	// unary or binary operator (push of the left operand, pop and the operation) to the column
	// of the operator. Optimized code attributes a folded constant subtree to its root.
	// Throws JitError.
	CompiledFunction compile(const Function &fn, uint64_t salt, Tier tier,
				 Frame frame = Frame::pointer);

	// Frees code that compile() made.
	void release(void *mem) noexcept;

private:
	class ErrorRecorder : public asmjit::ErrorHandler
	{
	public:
		void handleError(asmjit::Error err, const char *, asmjit::BaseEmitter *) override
		{
			if (error == asmjit::kErrorOk)
				error = err;
		}
		asmjit::Error error = asmjit::kErrorOk;
	};

	asmjit::JitRuntime runtime_;
	std::unique_ptr<WxArena> wx_; // Protection::wx only
	asmjit::CodeHolder holder_;   // reused, so that compiling reuses its memory
	ErrorRecorder errors_;
};

// The value compile(fn, salt, tier).code.entry()(x, iterations) returns, by interpretation.
uint64_t interpret(const Function &fn, uint64_t salt, uint64_t x, uint64_t iterations);

} // namespace calc

#endif
