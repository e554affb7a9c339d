#include "engine/chat/jinja_lexer.h"

#include <cctype>
#include <charconv>

#include "engine/common/error.h"

namespace rose::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// jinja2 reads templates with universal newlines and, without keep_trailing_newline, drops one
// final newline.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const std::string& name) : src_(std::move(source)), name_(name) {}
  std::vector<Token> run();

 private:
  enum class Tag { kVariable, kBlock, kComment };
  void emit_text(std::string text, Tag next_tag, char sign);
  void lex_comment();
  void lex_tag(Tag tag);
  bool at_tag_end(Tag tag, size_t& length, char& sign) const;
  void lex_string(char quote);
  void lex_number();
  void skip_after_tag(Tag tag, char sign);
  void advance(size_t n) {
    for (size_t i = 0; i < n && pos_ < src_.size(); ++i, ++pos_)
      if (src_[pos_] == '\n') ++line_;
  }
  Token make(TokenKind kind, std::string text = {}) const {
    return Token{kind, std::move(text), 0, 0, line_};
  }
  [[noreturn]] void error(int line, const std::string& what) const {
    fail("{}:{}: {}", name_, line, what);
  }

  std::string src_;
  const std::string& name_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

std::vector<Token> Lexer::run() {
  while (pos_ < src_.size()) {
    size_t start = src_.find('{', pos_);
    while (start != std::string::npos && start + 1 < src_.size() && src_[start + 1] != '{' &&
           src_[start + 1] != '%' && src_[start + 1] != '#')
      start = src_.find('{', start + 1);
    if (start == std::string::npos || start + 1 >= src_.size()) {
      Token text = make(TokenKind::kText, src_.substr(pos_));
      tokens_.push_back(std::move(text));
      advance(src_.size() - pos_);
      break;
    }
    Tag tag = src_[start + 1] == '{'   ? Tag::kVariable
              : src_[start + 1] == '%' ? Tag::kBlock
                                       : Tag::kComment;
    char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
    if (sign != '-' && sign != '+') sign = '\0';
    emit_text(src_.substr(pos_, start - pos_), tag, sign);
    advance(start - pos_ + 2 + (sign ? 1 : 0));
    if (tag == Tag::kComment)
      lex_comment();
    else
      lex_tag(tag);
  }
  tokens_.push_back(make(TokenKind::kEnd));
  return std::move(tokens_);
}

void Lexer::emit_text(std::string text, Tag next_tag, char sign) {
  if (sign == '-') {
    size_t keep = text.size();
    while (keep > 0 && is_space(text[keep - 1])) --keep;
    text.resize(keep);
  } else if (sign != '+' && next_tag != Tag::kVariable) {  // lstrip_blocks
    size_t line_begin = text.rfind('\n');
    line_begin = line_begin == std::string::npos ? 0 : line_begin + 1;
    bool blank = line_begin < text.size();
    for (size_t i = line_begin; i < text.size(); ++i) blank = blank && is_space(text[i]);
    if ((line_begin > 0 || line_starting_) && blank) text.resize(line_begin);
  }
  if (!text.empty()) tokens_.push_back(Token{TokenKind::kText, std::move(text), 0, 0, line_});
}

void Lexer::lex_comment() {
  int open_line = line_;
  size_t end = src_.find("#}", pos_);
  if (end == std::string::npos) error(open_line, "unclosed comment '{#'");
  char sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
  advance(end + 2 - pos_);
  skip_after_tag(Tag::kComment, sign);
}

void Lexer::skip_after_tag(Tag tag, char sign) {
  if (sign == '-') {
    while (pos_ < src_.size() && is_space(src_[pos_])) advance(1);
  } else if (sign != '+' && tag != Tag::kVariable && pos_ < src_.size() && src_[pos_] == '\n') {
    advance(1);  // trim_blocks
  }
  line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
}

bool Lexer::at_tag_end(Tag tag, size_t& length, char& sign) const {
  std::string_view rest = std::string_view(src_).substr(pos_);
  std::string_view close = tag == Tag::kBlock ? "%}" : "}}";
  sign = '\0';
  if (rest.starts_with(close)) {
    length = 2;
    return true;
  }
  if ((rest.starts_with('-') || rest.starts_with('+')) && rest.substr(1).starts_with(close)) {
    sign = rest[0];
    length = 3;
    return true;
  }
  return false;
}

void Lexer::lex_tag(Tag tag) {
  int open_line = line_;
  tokens_.push_back(make(tag == Tag::kBlock ? TokenKind::kBlockBegin : TokenKind::kVariableBegin));
  int bracket_depth = 0;  // jinja2 does not end a tag inside brackets: {{ {'a': {'b': 1}} }}
  for (;;) {
    while (pos_ < src_.size() && is_space(src_[pos_])) advance(1);
    if (pos_ >= src_.size())
      error(open_line,
            tag == Tag::kBlock ? "unclosed tag '{%' (no '%}')" : "unclosed '{{' (no '}}')");
    size_t end_length = 0;
    char sign = '\0';
    if (bracket_depth == 0 && at_tag_end(tag, end_length, sign)) {
      tokens_.push_back(make(tag == Tag::kBlock ? TokenKind::kBlockEnd : TokenKind::kVariableEnd));
      advance(end_length);
      skip_after_tag(tag, sign);
      return;
    }
    char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos_;
      while (end < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_'))
        ++end;
      tokens_.push_back(make(TokenKind::kName, src_.substr(pos_, end - pos_)));
      advance(end - pos_);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      lex_number();
    } else if (c == '\'' || c == '"') {
      lex_string(c);
    } else {
      static const char* const kOperators[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*",
                                               "/",  "%",  "~",  "<",  ">",  "=",  ".", ",", ":",
                                               "|",  "(",  ")",  "[",  "]",  "{",  "}", ";"};
      std::string_view rest = std::string_view(src_).substr(pos_);
      const char* found = nullptr;
      for (const char* op : kOperators)
        if (rest.starts_with(op)) {
          found = op;
          break;
        }
      if (!found) error(line_, "unexpected character '" + std::string(1, c) + "' in a tag");
      std::string op(found);
      if (op == "(" || op == "[" || op == "{") ++bracket_depth;
      if ((op == ")" || op == "]" || op == "}") && bracket_depth > 0) --bracket_depth;
      tokens_.push_back(make(TokenKind::kOperator, op));
      advance(op.size());
    }
  }
}

void Lexer::lex_number() {
  size_t end = pos_;
  auto digits = [&] {
    while (end < src_.size() &&
           (std::isdigit(static_cast<unsigned char>(src_[end])) || src_[end] == '_'))
      ++end;
  };
  digits();
  bool is_float = false;
  if (end + 1 < src_.size() && src_[end] == '.' &&
      std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
    is_float = true;
    ++end;
    digits();
  }
  if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
    size_t exp = end + 1;
    if (exp < src_.size() && (src_[exp] == '+' || src_[exp] == '-')) ++exp;
    if (exp < src_.size() && std::isdigit(static_cast<unsigned char>(src_[exp]))) {
      is_float = true;
      end = exp;
      digits();
    }
  }
  std::string text;
  for (size_t i = pos_; i < end; ++i)
    if (src_[i] != '_') text += src_[i];
  Token token = make(is_float ? TokenKind::kFloat : TokenKind::kInteger, text);
  if (is_float) {
    token.number = std::strtod(text.c_str(), nullptr);
  } else {
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), token.integer);
    if (ec != std::errc()) error(line_, "integer literal out of range: " + text);
  }
  tokens_.push_back(std::move(token));
  advance(end - pos_);
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Python string-literal escapes, as jinja2 unescapes them.
void Lexer::lex_string(char quote) {
  int open_line = line_;
  std::string value;
  size_t i = pos_ + 1;
  for (;; ++i) {
    if (i >= src_.size()) error(open_line, "unterminated string literal");
    char c = src_[i];
    if (c == quote) break;
    if (c != '\\') {
      value += c;
      continue;
    }
    if (++i >= src_.size()) error(open_line, "unterminated string literal");
    char e = src_[i];
    switch (e) {
      case 'n':
        value += '\n';
        break;
      case 't':
        value += '\t';
        break;
      case 'r':
        value += '\r';
        break;
      case '0':
        value += '\0';
        break;
      case 'b':
        value += '\b';
        break;
      case 'f':
        value += '\f';
        break;
      case 'v':
        value += '\v';
        break;
      case '\\':
      case '\'':
      case '"':
        value += e;
        break;
      case '\n':
        break;
      case 'x':
      case 'u':
      case 'U': {
        size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        if (i + digits >= src_.size())
          error(open_line, "truncated \\" + std::string(1, e) + " escape");
        uint32_t cp = 0;
        auto [ptr, ec] = std::from_chars(src_.data() + i + 1, src_.data() + i + 1 + digits, cp, 16);
        if (ec != std::errc() || ptr != src_.data() + i + 1 + digits || cp > 0x10FFFF)
          error(open_line, "bad \\" + std::string(1, e) + " escape");
        append_utf8(value, cp);
        i += digits;
        break;
      }
      default:
        value += '\\';
        value += e;  // Python keeps unknown escapes as they are
    }
  }
  tokens_.push_back(make(TokenKind::kString, std::move(value)));
  advance(i + 1 - pos_);
}

}  // namespace

std::vector<Token> tokenize(std::string_view source, const std::string& source_name) {
  return Lexer(normalize_newlines(source), source_name).run();
}

}  // namespace rose::jinja
