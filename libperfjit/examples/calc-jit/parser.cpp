// SPDX-License-Identifier: LGPL-2.1-or-later
#include "parser.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <unordered_set>
#include <utility>

namespace calc
{
namespace
{

// Limits that keep the recursive parser, evaluator and code generator off the end of the stack.
constexpr int max_depth = 200;	    // parentheses and unary operators
constexpr size_t max_nodes = 10000; // nodes per function

bool is_ident_start(char c)
{
	return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}

bool is_ident_char(char c)
{
	return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

struct Token {
	enum class Kind { end, ident, number, punct };

	Kind kind = Kind::end;
	std::string_view text;
	uint64_t value = 0;
	uint32_t column = 0;
};

// Parses one line: a function definition, or nothing but blanks and a comment.
class LineParser
{
public:
	LineParser(std::string_view line, uint32_t line_no, const std::string &path)
	    : line_(line), line_no_(line_no), path_(path)
	{
		advance();
	}

	bool blank() const { return tok_.kind == Token::Kind::end; }

	Function parse_function()
	{
		Function fn;
		fn.line = line_no_;
		fn.column = tok_.column;
		if (!accept_word("fn"))
			fail(tok_.column, "expected \"fn\"");
		fn.name = std::string(expect_ident("a function name"));
		expect("(");
		fn.param = std::string(expect_ident("a parameter name"));
		param_ = fn.param;
		expect(")");
		expect("=");
		fn.body = parse_expr(0);
		if (tok_.kind != Token::Kind::end)
			fail(tok_.column, "unexpected \"" + std::string(tok_.text) + "\"");
		return fn;
	}

	[[noreturn]] void fail(uint32_t column, const std::string &message) const
	{
		std::ostringstream os;
		os << path_ << ':' << line_no_ << ':' << column << ": " << message;
		throw ParseError(os.str());
	}

private:
	// The binary operators of each precedence level, loosest first.
	struct BinaryOp {
		int level;
		std::string_view spelling;
		Op op;
	};
	static constexpr BinaryOp binary_ops[] = {
		{0, "|", Op::bit_or}, {1, "^", Op::bit_xor}, {2, "&", Op::bit_and},
		{3, "<<", Op::shl},   {3, ">>", Op::shr},    {4, "+", Op::add},
		{4, "-", Op::sub},    {5, "*", Op::mul},
	};
	static constexpr int nr_levels = 6;

	const BinaryOp *binary_op_at(int level) const
	{
		for (const BinaryOp &b : binary_ops)
			if (b.level == level && is_punct(b.spelling))
				return &b;
		return nullptr;
	}

	std::unique_ptr<Node> new_node(Node::Kind kind)
	{
		if (++nr_nodes_ > max_nodes)
			fail(tok_.column, "expression too long");
		auto node = std::make_unique<Node>();
		node->kind = kind;
		node->column = tok_.column;
		return node;
	}

	std::unique_ptr<Node> parse_expr(int depth)
	{
		if (depth > max_depth)
			fail(tok_.column, "expression nested too deeply");
		return parse_level(0, depth);
	}

	std::unique_ptr<Node> parse_level(int level, int depth)
	{
		if (level == nr_levels)
			return parse_unary(depth);
		auto lhs = parse_level(level + 1, depth);
		while (const BinaryOp *b = binary_op_at(level)) {
			auto node = new_node(Node::Kind::binary);
			node->op = b->op;
			advance();
			node->lhs = std::move(lhs);
			node->rhs = parse_level(level + 1, depth);
			lhs = std::move(node);
		}
		return lhs;
	}

	std::unique_ptr<Node> parse_unary(int depth)
	{
		if (is_punct("-") || is_punct("~")) {
			if (depth > max_depth)
				fail(tok_.column, "expression nested too deeply");
			auto node = new_node(Node::Kind::unary);
			node->op = is_punct("-") ? Op::neg : Op::bit_not;
			node->column = tok_.column;
			advance();
			node->lhs = parse_unary(depth + 1);
			return node;
		}
		return parse_primary(depth);
	}

	std::unique_ptr<Node> parse_primary(int depth)
	{
		switch (tok_.kind) {
		case Token::Kind::number: {
			auto node = new_node(Node::Kind::literal);
			node->value = tok_.value;
			advance();
			return node;
		}
		case Token::Kind::ident: {
			if (tok_.text != param_)
				fail(tok_.column,
				     "unknown name \"" + std::string(tok_.text) + "\"");
			auto node = new_node(Node::Kind::param);
			advance();
			return node;
		}
		case Token::Kind::punct:
			if (is_punct("(")) {
				advance();
				auto inner = parse_expr(depth + 1);
				expect(")");
				return inner;
			}
			break;
		case Token::Kind::end:
			fail(tok_.column, "unexpected end of line");
		}
		fail(tok_.column, "unexpected \"" + std::string(tok_.text) + "\"");
	}

	bool is_punct(std::string_view p) const
	{
		return tok_.kind == Token::Kind::punct && tok_.text == p;
	}

	bool accept_word(std::string_view word)
	{
		if (tok_.kind != Token::Kind::ident || tok_.text != word)
			return false;
		advance();
		return true;
	}

	std::string_view expect_ident(const char *what)
	{
		if (tok_.kind != Token::Kind::ident)
			fail(tok_.column, std::string("expected ") + what);
		const std::string_view text = tok_.text;
		advance();
		return text;
	}

	void expect(std::string_view p)
	{
		if (!is_punct(p))
			fail(tok_.column, "expected \"" + std::string(p) + "\"");
		advance();
	}

	void advance()
	{
		while (pos_ < line_.size() && std::isspace(static_cast<unsigned char>(line_[pos_])))
			pos_++;
		tok_ = Token();
		tok_.column = static_cast<uint32_t>(pos_ + 1);
		if (pos_ == line_.size() || line_[pos_] == '#')
			return;
		const size_t start = pos_;
		const char c = line_[pos_];
		if (is_ident_start(c)) {
			while (pos_ < line_.size() && is_ident_char(line_[pos_]))
				pos_++;
			tok_.kind = Token::Kind::ident;
		} else if (std::isdigit(static_cast<unsigned char>(c))) {
			while (pos_ < line_.size() && is_ident_char(line_[pos_]))
				pos_++;
			tok_.kind = Token::Kind::number;
			tok_.value = parse_number(line_.substr(start, pos_ - start), tok_.column);
		} else if ((c == '<' || c == '>') && pos_ + 1 < line_.size() &&
			   line_[pos_ + 1] == c) {
			pos_ += 2;
			tok_.kind = Token::Kind::punct;
		} else if (std::strchr("+-*^&|()=~", c)) {
			pos_++;
			tok_.kind = Token::Kind::punct;
		} else {
			fail(tok_.column, std::string("unexpected character '") + c + "'");
		}
		tok_.text = line_.substr(start, pos_ - start);
	}

	uint64_t parse_number(std::string_view text, uint32_t column) const
	{
		const std::string s(text);
		const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
		const char *digits = s.c_str() + (hex ? 2 : 0);
		char *end = nullptr;
		errno = 0;
		const unsigned long long v = std::strtoull(digits, &end, hex ? 16 : 10);
		if (*end != '\0' || *digits == '-' || *digits == '+' ||
		    std::isspace(static_cast<unsigned char>(*digits)))
			fail(column, "malformed number \"" + s + "\"");
		if (errno == ERANGE)
			fail(column, "number \"" + s + "\" does not fit in 64 bits");
		return static_cast<uint64_t>(v);
	}

	std::string_view line_;
	uint32_t line_no_;
	const std::string &path_;
	size_t pos_ = 0;
	Token tok_;
	std::string param_;
	size_t nr_nodes_ = 0;
};

} // namespace

Program parse_program_text(const std::string &text, const std::string &path)
{
	Program program;
	program.path = path;
	std::unordered_set<std::string> names;
	std::string_view rest(text);
	uint32_t line_no = 0;
	while (!rest.empty()) {
		const size_t nl = rest.find('\n');
		std::string_view line = rest.substr(0, nl);
		rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
		if (!line.empty() && line.back() == '\r')
			line.remove_suffix(1);
		line_no++;
		LineParser parser(line, line_no, path);
		if (parser.blank())
			continue;
		Function fn = parser.parse_function();
		if (!names.insert(fn.name).second)
			parser.fail(fn.column, "function \"" + fn.name + "\" is defined twice");
		program.functions.push_back(std::move(fn));
	}
	if (program.functions.empty())
		throw ParseError(path + ": the program defines no function");
	return program;
}

Program parse_program(const std::string &path)
{
	std::ifstream in(path, std::ios::binary);
	if (!in)
		throw ParseError(path + ": " + std::strerror(errno));
	std::ostringstream text;
	text << in.rdbuf();
	if (in.bad())
		throw ParseError(path + ": read error");

	// The line tables name the source by absolute path.
	const std::unique_ptr<char, decltype(&std::free)> absolute(realpath(path.c_str(), nullptr),
								   &std::free);
	return parse_program_text(text.str(), absolute ? std::string(absolute.get()) : path);
}

} // namespace calc
