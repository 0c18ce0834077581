// SPDX-License-Identifier: LGPL-2.1-or-later
// perfjit-calc: a recursive-descent parser for the toy expression language.
//
//	program  := { line }	one function per line; '#' starts a comment
//	line     := "fn" name "(" param ")" "=" expr
//	expr     := xor { "|" xor }
//	xor      := and { "^" and }
//	and      := shift { "&" shift }
//	shift    := sum { ("<<" | ">>") sum }
//	sum      := product { ("+" | "-") product }
//	product  := unary { "*" unary }
//	unary    := ("-" | "~") unary | primary
//	primary  := number | param | "(" expr ")"
//	number   := decimal | "0x" hex	(up to 2^64 - 1)
#ifndef PERFJIT_CALC_PARSER_H
#define PERFJIT_CALC_PARSER_H

#include <stdexcept>
#include <string>

#include "ast.h"

namespace calc
{

// Thrown for unreadable or malformed programs; what() is "file:line:column: message".
class ParseError : public std::runtime_error
{
public:
	using std::runtime_error::runtime_error;
};

// Parses the program in the file at @path; Program::path is its absolute path.
Program parse_program(const std::string &path);

// Parses program text; @path only names the source in error messages and Program::path.
Program parse_program_text(const std::string &text, const std::string &path);

} // namespace calc

#endif
