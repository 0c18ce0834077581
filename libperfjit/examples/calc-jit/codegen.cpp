// SPDX-License-Identifier: LGPL-2.1-or-later
#include "codegen.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <dwarf.h>
#include <string>
#include <utility>

#include "byte_writer.hpp"

namespace calc
{

using namespace asmjit::x86;
using asmjit::imm;

JitCode::JitCode(JitCode &&other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), mem_(std::exchange(other.mem_, nullptr)),
      size_(std::exchange(other.size_, 0))
{
}

JitCode &JitCode::operator=(JitCode &&other) noexcept
{
	if (this != &other) {
		reset();
		owner_ = std::exchange(other.owner_, nullptr);
		mem_ = std::exchange(other.mem_, nullptr);
		size_ = std::exchange(other.size_, 0);
	}
	return *this;
}

void JitCode::reset() noexcept
{
	if (mem_)
		owner_->release(mem_);
	mem_ = nullptr;
	size_ = 0;
}

namespace
{

// Address space kept for W^X code: reserved, not committed (PROT_NONE, MAP_NORESERVE).
constexpr size_t kWxReserve = size_t{4} << 30;
// Each block starts on a cache line, as AsmJit's allocator places code.
constexpr size_t kWxAlign = 64;

size_t page_size() noexcept
{
	static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
	return size;
}

} // namespace

void WxArena::Unmap::operator()(uint8_t *base) const noexcept
{
	munmap(base, size);
}

WxArena::WxArena()
{
	void *base = mmap(nullptr, kWxReserve, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		throw JitError(std::string("cannot reserve W^X code memory: ") +
			       std::strerror(errno));
	base_ = std::unique_ptr<uint8_t, Unmap>(static_cast<uint8_t *>(base), Unmap{kWxReserve});
}

bool WxArena::protect(uint8_t *mem, size_t size, int prot) noexcept
{
	const uintptr_t page = page_size();
	const uintptr_t start = reinterpret_cast<uintptr_t>(mem) & ~(page - 1);
	const uintptr_t end = (reinterpret_cast<uintptr_t>(mem) + size + page - 1) & ~(page - 1);
	return mprotect(reinterpret_cast<void *>(start), end - start, prot) == 0;
}

void *WxArena::add(asmjit::CodeHolder &holder)
{
	asmjit::Error err = holder.flatten();
	const size_t size = holder.codeSize();
	if (err != asmjit::kErrorOk || size == 0)
		throw JitError(std::string("cannot lay out code: ") +
			       asmjit::DebugUtils::errorAsString(err));

	uint8_t *mem;
	if (auto it = free_.find(size); it != free_.end()) {
		mem = it->second;
		free_.erase(it);
	} else {
		const size_t len = (size + kWxAlign - 1) & ~(kWxAlign - 1);
		if (len > kWxReserve - used_)
			throw JitError("W^X code memory exhausted");
		mem = base_.get() + used_;
		used_ += len;
	}
	err = holder.relocateToBase(reinterpret_cast<uintptr_t>(mem));
	if (err == asmjit::kErrorOk && !protect(mem, size, PROT_READ | PROT_WRITE))
		throw JitError(std::string("cannot make code writable: ") + std::strerror(errno));
	if (err == asmjit::kErrorOk)
		err = holder.copyFlattenedData(mem, size,
					       asmjit::CopySectionFlags::kPadSectionBuffer);
	// Executable again, whatever happened: other code shares the pages.
	if (!protect(mem, size, PROT_READ | PROT_EXEC))
		throw JitError(std::string("cannot make code executable: ") + std::strerror(errno));
	if (err != asmjit::kErrorOk) {
		free_.emplace(size, mem);
		throw JitError(std::string("cannot place code: ") +
			       asmjit::DebugUtils::errorAsString(err));
	}
	sizes_.emplace(mem, size);
	return mem;
}

void WxArena::release(void *mem) noexcept
{
	if (auto it = sizes_.find(mem); it != sizes_.end()) {
		free_.emplace(it->second, static_cast<uint8_t *>(mem));
		sizes_.erase(it);
	}
}

Jit::Jit(Protection protection)
{
	if (protection == Protection::wx)
		wx_ = std::make_unique<WxArena>();
}

void Jit::release(void *mem) noexcept
{
	if (wx_)
		wx_->release(mem);
	else
		runtime_.release(mem);
}

namespace
{

bool fits_imm32(uint64_t v)
{
	const auto s = static_cast<int64_t>(v);
	return s >= INT32_MIN && s <= INT32_MAX;
}

// Where the canonical frame address moves: from @offset in the code on, CFA = rsp + @cfa.
struct CfaRow {
	uint32_t offset;
	uint32_t cfa;
};

// An .eh_frame_hdr with the search table of one FDE takes 20 bytes.
constexpr size_t kEhFrameHdrRoom = 24;

// The x86-64 psABI's DWARF register numbers.
constexpr unsigned kDwarfRsp = 7;
constexpr unsigned kDwarfReturnAddress = 16;

// Starts an .eh_frame entry: its length, patched by end_entry().
size_t begin_entry(perfjit::ByteWriter &w)
{
	const size_t at = w.size();

	w.u32(0);
	return at;
}

// Pads the entry to 8 bytes with DW_CFA_nop and writes its length.
void end_entry(perfjit::ByteWriter &w, size_t at)
{
	while ((w.size() - at) % 8)
		w.u8(DW_CFA_nop);
	w.patch32(at, static_cast<uint32_t>(w.size() - at - 4));
}

// The .eh_frame of a function of @code_len bytes whose CFA is rsp + 8 at entry (the return
// address just pushed) and moves as @rows say; nothing else is saved. The FDE's address is
// pc-relative to where the table sits: at the first 8-byte aligned address after the code.
std::vector<uint8_t> make_eh_frame(size_t code_len, const std::vector<CfaRow> &rows)
{
	const int64_t table_at = (code_len + 7) & ~size_t{7};
	perfjit::ByteWriter w;

	const size_t cie = begin_entry(w);
	w.u32(0); // CIE id
	w.u8(1);  // version
	w.u8('z');
	w.u8('R');
	w.u8(0);
	w.uleb(1);  // code alignment
	w.sleb(-8); // data alignment
	w.uleb(kDwarfReturnAddress);
	w.uleb(1); // augmentation data: the FDE pointer encoding
	w.u8(DW_EH_PE_pcrel | DW_EH_PE_sdata4);
	w.u8(DW_CFA_def_cfa);
	w.uleb(kDwarfRsp);
	w.uleb(8);
	w.u8(DW_CFA_offset | kDwarfReturnAddress);
	w.uleb(1); // at CFA - 8
	end_entry(w, cie);

	const size_t fde = begin_entry(w);
	w.u32(w.bytes.size() - cie); // back to the CIE
	w.u32(static_cast<uint32_t>(-(table_at + static_cast<int64_t>(w.bytes.size()))));
	w.u32(code_len);
	w.uleb(0); // no augmentation data
	uint32_t loc = 0;
	for (const CfaRow &row : rows) {
		const uint32_t delta = row.offset - loc;
		if (delta < 0x40) {
			w.u8(DW_CFA_advance_loc | delta);
		} else if (delta <= UINT8_MAX) {
			w.u8(DW_CFA_advance_loc1);
			w.u8(delta);
		} else if (delta <= UINT16_MAX) {
			w.u8(DW_CFA_advance_loc2);
			w.u16(delta);
		} else {
			w.u8(DW_CFA_advance_loc4);
			w.u32(delta);
		}
		w.u8(DW_CFA_def_cfa_offset);
		w.uleb(row.cfa);
		loc = row.offset;
	}
	end_entry(w, fde);
	return std::move(w.bytes);
}

bool is_commutative(Op op)
{
	return op == Op::add || op == Op::mul || op == Op::bit_and || op == Op::bit_or ||
	       op == Op::bit_xor;
}

// Emits one function and its line table.
class Emitter
{
public:
	Emitter(Assembler &a, std::vector<perfjit_line> &lines, const Function &fn, Tier tier,
		Frame frame)
	    : a_(a), lines_(lines), fn_(fn), tier_(tier), frame_(frame)
	{
	}

	// Frame::cfi: where the CFA moves.
	const std::vector<CfaRow> &cfa_rows() const { return cfa_rows_; }

	// x arrives in rdi and the iteration count in rsi (System V); the body reads x from rdi
	// and leaves its value in rax; rcx is the scratch register.
	void function(uint64_t salt)
	{
		const asmjit::Label loop = a_.newLabel();
		const asmjit::Label done = a_.newLabel();

		mark(fn_.column);
		if (frame_ == Frame::pointer) {
			a_.push(rbp);
			a_.mov(rbp, rsp);
		}
		a_.mov(rax, rdi);
		a_.test(rsi, rsi);
		a_.jz(done);
		a_.bind(loop);
		if (frame_ == Frame::cfi) {
			// x, the count and the value live across the call; three pushes after
			// the return address leave rsp 16-byte aligned, as the ABI wants.
			push(rdi);
			push(rsi);
			push(rax);
			a_.mov(rcx, imm(reinterpret_cast<uintptr_t>(&native_work)));
			a_.call(rcx);
			pop(rax);
			pop(rsi);
			pop(rdi);
		}
		expr(*fn_.body);
		if (salt != 0) {
			mark(fn_.column);
			op_imm(Op::add, salt);
		}
		mark(fn_.column);
		a_.mov(rdi, rax);
		a_.dec(rsi);
		a_.jnz(loop);
		a_.bind(done);
		if (frame_ == Frame::pointer)
			a_.pop(rbp);
		a_.ret();
	}

private:
	// A push or pop of a temporary; without a frame pointer the CFA moves with rsp.
	void push(const Gp &reg)
	{
		a_.push(reg);
		depth_ += 8;
		moved();
	}

	void pop(const Gp &reg)
	{
		a_.pop(reg);
		depth_ -= 8;
		moved();
	}

	void moved()
	{
		if (frame_ == Frame::cfi)
			cfa_rows_.push_back(CfaRow{static_cast<uint32_t>(a_.offset()), 8 + depth_});
	}

	// The code from here on comes from @column of the function's line.
	void mark(uint32_t column)
	{
		const uint64_t offset = a_.offset();
		if (!lines_.empty() && lines_.back().offset == offset) {
			lines_.back().column = column; // the previous row covers no code
			if (lines_.size() >= 2 && lines_[lines_.size() - 2].column == column)
				lines_.pop_back();
			return;
		}
		if (!lines_.empty() && lines_.back().column == column)
			return;
		lines_.push_back(perfjit_line{offset, fn_.line, column});
	}

	static bool is_leaf(const Node &node)
	{
		return node.kind == Node::Kind::param || is_constant(node);
	}

	void expr(const Node &node)
	{
		if (tier_ == Tier::optimized && node.kind != Node::Kind::param &&
		    is_constant(node)) {
			mark(node.column);
			a_.mov(rax, imm(evaluate(node, 0)));
			return;
		}
		switch (node.kind) {
		case Node::Kind::literal:
			mark(node.column);
			a_.mov(rax, imm(node.value));
			return;
		case Node::Kind::param:
			mark(node.column);
			a_.mov(rax, rdi);
			return;
		case Node::Kind::unary:
			expr(*node.lhs);
			mark(node.column);
			if (node.op == Op::neg)
				a_.neg(rax);
			else
				a_.not_(rax);
			return;
		case Node::Kind::binary:
			binary(node);
			return;
		}
	}

	void binary(const Node &node)
	{
		const Node *lhs = node.lhs.get();
		const Node *rhs = node.rhs.get();
		if (tier_ == Tier::optimized) {
			if (is_commutative(node.op) && is_leaf(*lhs) && !is_leaf(*rhs))
				std::swap(lhs, rhs);
			if (is_leaf(*rhs)) {
				expr(*lhs);
				mark(node.column);
				if (rhs->kind == Node::Kind::param)
					op_reg(node.op, rdi);
				else
					op_imm(node.op, evaluate(*rhs, 0));
				return;
			}
		}
		expr(*lhs);
		mark(node.column);
		push(rax);
		expr(*rhs);
		mark(node.column);
		a_.mov(rcx, rax);
		pop(rax);
		op_reg(node.op, rcx);
	}

	// rax = rax op reg
	void op_reg(Op op, const Gp &reg)
	{
		switch (op) {
		case Op::add:
			a_.add(rax, reg);
			break;
		case Op::sub:
			a_.sub(rax, reg);
			break;
		case Op::mul:
			a_.imul(rax, reg);
			break;
		case Op::bit_and:
			a_.and_(rax, reg);
			break;
		case Op::bit_or:
			a_.or_(rax, reg);
			break;
		case Op::bit_xor:
			a_.xor_(rax, reg);
			break;
		case Op::shl:
		case Op::shr: // the count is taken modulo 64 by the hardware
			if (reg != rcx)
				a_.mov(rcx, reg);
			if (op == Op::shl)
				a_.shl(rax, cl);
			else
				a_.shr(rax, cl);
			break;
		case Op::neg:
		case Op::bit_not:
			break;
		}
	}

	// rax = rax op v
	void op_imm(Op op, uint64_t v)
	{
		if (op == Op::shl || op == Op::shr) {
			if (op == Op::shl)
				a_.shl(rax, imm(v & 63));
			else
				a_.shr(rax, imm(v & 63));
			return;
		}
		if (!fits_imm32(v)) {
			a_.mov(rcx, imm(v));
			op_reg(op, rcx);
			return;
		}
		const asmjit::Imm i = imm(static_cast<int64_t>(v));
		switch (op) {
		case Op::add:
			a_.add(rax, i);
			break;
		case Op::sub:
			a_.sub(rax, i);
			break;
		case Op::mul:
			a_.imul(rax, rax, i);
			break;
		case Op::bit_and:
			a_.and_(rax, i);
			break;
		case Op::bit_or:
			a_.or_(rax, i);
			break;
		case Op::bit_xor:
			a_.xor_(rax, i);
			break;
		case Op::shl:
		case Op::shr:
		case Op::neg:
		case Op::bit_not:
			break;
		}
	}

	Assembler &a_;
	std::vector<perfjit_line> &lines_;
	const Function &fn_;
	const Tier tier_;
	const Frame frame_;
	uint32_t depth_ = 0; // bytes pushed since entry
	std::vector<CfaRow> cfa_rows_;
};

} // namespace

void native_work() noexcept
{
	static volatile uint64_t sink;

	for (uint64_t i = 0; i < 16; i++)
		sink = sink + i;
}

CompiledFunction Jit::compile(const Function &fn, uint64_t salt, Tier tier, Frame frame)
{
	CompiledFunction out;
	size_t code_len = 0;

	holder_.reset();
	errors_.error = asmjit::kErrorOk;
	asmjit::Error err = holder_.init(runtime_.environment());
	if (err == asmjit::kErrorOk) {
		holder_.setErrorHandler(&errors_);
		Assembler a(&holder_);
		Emitter emitter(a, out.lines, fn, tier, frame);
		emitter.function(salt);
		code_len = a.offset();
		if (frame == Frame::cfi) {
			// The table follows the code in memory too, where jitdump's
			// unwinding record (and perf inject --jit's map) puts it, with
			// room for the header libperfjit makes: no other code may
			// start there.
			out.eh_frame = make_eh_frame(code_len, emitter.cfa_rows());
			a.align(asmjit::AlignMode::kZero, 8);
			a.embed(out.eh_frame.data(), out.eh_frame.size());
			static constexpr uint8_t header_room[kEhFrameHdrRoom] = {};
			a.embed(header_room, sizeof(header_room));
		}
		err = errors_.error;
	}
	void *mem = nullptr;
	if (err == asmjit::kErrorOk && !wx_)
		err = runtime_.add(&mem, &holder_);
	if (err != asmjit::kErrorOk)
		throw JitError("cannot compile " + fn.name + ": " +
			       asmjit::DebugUtils::errorAsString(err));
	if (wx_) {
		try {
			mem = wx_->add(holder_);
		} catch (const JitError &e) {
			throw JitError("cannot compile " + fn.name + ": " + e.what());
		}
	}
	out.code = JitCode(*this, mem, code_len);
	return out;
}

uint64_t interpret(const Function &fn, uint64_t salt, uint64_t x, uint64_t iterations)
{
	for (uint64_t i = 0; i < iterations; i++)
		x = evaluate(*fn.body, x) + salt;
	return x;
}

} // namespace calc
