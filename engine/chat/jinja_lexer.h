#pragma once
// Jinja lexer: template text to tokens, applying jinja2's whitespace rules as transformers sets
// them (trim_blocks, lstrip_blocks, {%- -%} control, one trailing newline dropped).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rose::jinja {

enum class TokenKind {
  kText,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEnd
};

struct Token {
  TokenKind kind;
  std::string text;  // text, name, string contents or operator
  int64_t integer = 0;
  double number = 0;
  int line = 1;
};

// Throws rose::Error naming `source_name` and the line for an unclosed tag, comment or string.
std::vector<Token> tokenize(std::string_view source, const std::string& source_name);

}  // namespace rose::jinja
