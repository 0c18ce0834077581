// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ast.h"

namespace calc
{

uint64_t evaluate(const Node &node, uint64_t x)
{
	switch (node.kind) {
	case Node::Kind::literal:
		return node.value;
	case Node::Kind::param:
		return x;
	case Node::Kind::unary: {
		const uint64_t v = evaluate(*node.lhs, x);
		return node.op == Op::neg ? 0 - v : ~v;
	}
	case Node::Kind::binary:
		break;
	}
	const uint64_t a = evaluate(*node.lhs, x);
	const uint64_t b = evaluate(*node.rhs, x);
	switch (node.op) {
	case Op::add:
		return a + b;
	case Op::sub:
		return a - b;
	case Op::mul:
		return a * b;
	case Op::bit_and:
		return a & b;
	case Op::bit_or:
		return a | b;
	case Op::bit_xor:
		return a ^ b;
	case Op::shl:
		return a << (b & 63);
	case Op::shr:
		return a >> (b & 63);
	case Op::neg:
	case Op::bit_not:
		break;
	}
	return 0;
}

bool is_constant(const Node &node)
{
	switch (node.kind) {
	case Node::Kind::literal:
		return true;
	case Node::Kind::param:
		return false;
	case Node::Kind::unary:
		return is_constant(*node.lhs);
	case Node::Kind::binary:
		return is_constant(*node.lhs) && is_constant(*node.rhs);
	}
	return false;
}

} // namespace calc
