// SPDX-License-Identifier: LGPL-2.1-or-later
#include "codegen.h"

#include <string>
#include <utility>

namespace calc
{

using namespace asmjit::x86;
using asmjit::imm;

JitCode::JitCode(JitCode &&other) noexcept
    : runtime_(std::exchange(other.runtime_, nullptr)), mem_(std::exchange(other.mem_, nullptr)),
      size_(std::exchange(other.size_, 0))
{
}

JitCode &JitCode::operator=(JitCode &&other) noexcept
{
	if (this != &other) {
		reset();
		runtime_ = std::exchange(other.runtime_, nullptr);
		mem_ = std::exchange(other.mem_, nullptr);
		size_ = std::exchange(other.size_, 0);
	}
	return *this;
}

void JitCode::reset() noexcept
{
	if (mem_)
		runtime_->release(mem_);
	mem_ = nullptr;
	size_ = 0;
}

namespace
{

bool fits_imm32(uint64_t v)
{
	const auto s = static_cast<int64_t>(v);
	return s >= INT32_MIN && s <= INT32_MAX;
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
	Emitter(Assembler &a, std::vector<perfjit_line> &lines, const Function &fn, Tier tier)
	    : a_(a), lines_(lines), fn_(fn), tier_(tier)
	{
	}

	// x arrives in rdi and the iteration count in rsi (System V); the body reads x from rdi
	// and leaves its value in rax; rcx is the scratch register.
	void function(uint64_t salt)
	{
		const asmjit::Label loop = a_.newLabel();
		const asmjit::Label done = a_.newLabel();

		mark(fn_.column);
		a_.push(rbp);
		a_.mov(rbp, rsp);
		a_.mov(rax, rdi);
		a_.test(rsi, rsi);
		a_.jz(done);
		a_.bind(loop);
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
		a_.pop(rbp);
		a_.ret();
	}

private:
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
		a_.push(rax);
		expr(*rhs);
		mark(node.column);
		a_.mov(rcx, rax);
		a_.pop(rax);
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
};

} // namespace

CompiledFunction Jit::compile(const Function &fn, uint64_t salt, Tier tier)
{
	CompiledFunction out;

	holder_.reset();
	errors_.error = asmjit::kErrorOk;
	asmjit::Error err = holder_.init(runtime_.environment());
	if (err == asmjit::kErrorOk) {
		holder_.setErrorHandler(&errors_);
		Assembler a(&holder_);
		Emitter(a, out.lines, fn, tier).function(salt);
		err = errors_.error;
	}
	void *mem = nullptr;
	if (err == asmjit::kErrorOk)
		err = runtime_.add(&mem, &holder_);
	if (err != asmjit::kErrorOk)
		throw JitError("cannot compile " + fn.name + ": " +
			       asmjit::DebugUtils::errorAsString(err));
	out.code = JitCode(runtime_, mem, holder_.codeSize());
	return out;
}

uint64_t interpret(const Function &fn, uint64_t salt, uint64_t x, uint64_t iterations)
{
	for (uint64_t i = 0; i < iterations; i++)
		x = evaluate(*fn.body, x) + salt;
	return x;
}

} // namespace calc
