// SPDX-License-Identifier: LGPL-2.1-or-later
// perfjit-calc: the syntax tree of the toy expression language.
#ifndef PERFJIT_CALC_AST_H
#define PERFJIT_CALC_AST_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace calc
{

enum class Op { add, sub, mul, bit_and, bit_or, bit_xor, shl, shr, neg, bit_not };

struct Node {
	enum class Kind { literal, param, unary, binary };

	Kind kind = Kind::literal;
	Op op = Op::add;	   // unary and binary nodes
	uint64_t value = 0;	   // literals
	uint32_t column = 0;	   // 1-based column of the literal, name or operator
	std::unique_ptr<Node> lhs; // the operand of a unary node
	std::unique_ptr<Node> rhs;
};

struct Function {
	std::string name;
	std::string param;
	uint32_t line = 0;   // 1-based line in the program file
	uint32_t column = 0; // 1-based column of "fn"
	std::unique_ptr<Node> body;
};

struct Program {
	std::string path; // absolute path of the source file
	std::vector<Function> functions;
};

// Evaluates @node with the parameter bound to @x. Arithmetic wraps modulo 2^64,
// >> is a logical shift and shift counts are taken modulo 64, as in the generated code.
uint64_t evaluate(const Node &node, uint64_t x);

// True if @node does not depend on the parameter.
bool is_constant(const Node &node);

} // namespace calc

#endif
