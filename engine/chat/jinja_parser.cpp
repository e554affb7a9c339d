#include "engine/chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "engine/common/error.h"

namespace rose::jinja {
namespace {

// Deeper nesting than this is refused so that hostile input cannot overflow the stack.
constexpr int kMaxNesting = 200;

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name)
      : tokens_(tokens), name_(name) {}
  Body parse_all();

 private:
  // Statements
  Body parse_body(std::initializer_list<std::string_view> end_tags, std::string& found_end);
  StmtPtr parse_statement();
  StmtPtr parse_if(int line);
  StmtPtr parse_for(int line);
  StmtPtr parse_set(int line);
  StmtPtr parse_macro(int line);
  StmtPtr parse_call_block(int line);
  StmtPtr parse_with_body(StmtKind kind, int line, std::string_view end_tag);
  void expect_block_end();

  // Expressions, loosest binding first (jinja2's parser order)
  ExprPtr parse_expression(bool allow_conditional = true);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_additive();
  ExprPtr parse_concat();
  ExprPtr parse_multiplicative();
  ExprPtr parse_power();
  ExprPtr parse_unary();
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filters_and_tests(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node, int line);
  void parse_call_arguments(Expr& call);
  ExprPtr parse_tuple_or_expression(bool allow_conditional);
  std::vector<std::string> parse_target_names();

  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOperator && peek(ahead).text == op;
  }
  bool is_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  bool accept_op(std::string_view op) { return is_op(op) ? (next(), true) : false; }
  bool accept_name(std::string_view name) { return is_name(name) ? (next(), true) : false; }
  void expect_op(std::string_view op);
  std::string expect_name(std::string_view what);
  [[noreturn]] void error(const std::string& what) const {
    fail("{}:{}: {}", name_, peek().line, what);
  }
  std::string describe(const Token& t) const;
  ExprPtr node(ExprKind kind, int line, std::string name = {}) const {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    e->name = std::move(name);
    return e;
  }
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.error("nesting deeper than 200 levels");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const std::vector<Token>& tokens_;
  const std::string& name_;
  size_t pos_ = 0;
  int depth_ = 0;
};

std::string Parser::describe(const Token& t) const {
  switch (t.kind) {
    case TokenKind::kEnd:
      return "end of template";
    case TokenKind::kBlockEnd:
      return "'%}'";
    case TokenKind::kVariableEnd:
      return "'}}'";
    case TokenKind::kString:
      return "a string";
    default:
      return "'" + t.text + "'";
  }
}

void Parser::expect_op(std::string_view op) {
  if (!accept_op(op)) error(fmt::format("expected '{}', got {}", op, describe(peek())));
}

std::string Parser::expect_name(std::string_view what) {
  if (peek().kind != TokenKind::kName)
    error(fmt::format("expected {}, got {}", what, describe(peek())));
  return next().text;
}

void Parser::expect_block_end() {
  if (peek().kind != TokenKind::kBlockEnd)
    error(fmt::format("expected '%}}', got {}", describe(peek())));
  next();
}

Body Parser::parse_all() {
  std::string found_end;
  Body body = parse_body({}, found_end);
  return body;
}

Body Parser::parse_body(std::initializer_list<std::string_view> end_tags, std::string& found_end) {
  DepthGuard guard(*this);
  Body body;
  for (;;) {
    const Token& t = peek();
    if (t.kind == TokenKind::kEnd) {
      if (end_tags.size() == 0) return body;
      error(fmt::format("unbalanced tags: missing '{{% {} %}}' before the end of the template",
                        *(end_tags.end() - 1)));
    }
    if (t.kind == TokenKind::kText) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kText;
      s->line = t.line;
      s->text = next().text;
      body.push_back(std::move(s));
    } else if (t.kind == TokenKind::kVariableBegin) {
      int line = next().line;
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kPrint;
      s->line = line;
      s->exprs.push_back(parse_tuple_or_expression(true));
      if (peek().kind != TokenKind::kVariableEnd)
        error(fmt::format("expected '}}}}', got {}", describe(peek())));
      next();
      body.push_back(std::move(s));
    } else if (t.kind == TokenKind::kBlockBegin) {
      const Token& tag = peek(1);
      if (tag.kind == TokenKind::kName &&
          std::find(end_tags.begin(), end_tags.end(), tag.text) != end_tags.end()) {
        found_end = tag.text;
        next();
        next();
        return body;
      }
      body.push_back(parse_statement());
    } else {
      error("unexpected " + describe(t));
    }
  }
}

StmtPtr Parser::parse_statement() {
  int line = next().line;  // '{%'
  std::string tag = expect_name("a tag name");
  if (tag == "if") return parse_if(line);
  if (tag == "for") return parse_for(line);
  if (tag == "set") return parse_set(line);
  if (tag == "macro") return parse_macro(line);
  if (tag == "call") return parse_call_block(line);
  if (tag == "generation") return parse_with_body(StmtKind::kGeneration, line, "endgeneration");
  if (tag == "break" || tag == "continue") {
    auto s = std::make_unique<Stmt>();
    s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    s->line = line;
    expect_block_end();
    return s;
  }
  static const std::string_view kKnownEnds[] = {"endif",   "endfor",        "endset", "endmacro",
                                                "endcall", "endgeneration", "elif",   "else"};
  if (std::find(std::begin(kKnownEnds), std::end(kKnownEnds), tag) != std::end(kKnownEnds))
    fail("{}:{}: unbalanced tags: '{{% {} %}}' without a matching opening tag", name_, line, tag);
  fail("{}:{}: unsupported construct: '{{% {} %}}' tag", name_, line, tag);
}

StmtPtr Parser::parse_if(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kIf;
  s->line = line;
  s->exprs.push_back(parse_tuple_or_expression(true));
  expect_block_end();
  for (;;) {
    std::string end;
    s->bodies.push_back(parse_body({"elif", "else", "endif"}, end));
    if (end == "elif") {
      s->exprs.push_back(parse_tuple_or_expression(true));
      expect_block_end();
    } else if (end == "else") {
      expect_block_end();
      s->bodies.push_back(parse_body({"endif"}, end));
      expect_block_end();
      return s;
    } else {
      expect_block_end();
      return s;
    }
  }
}

std::vector<std::string> Parser::parse_target_names() {
  std::vector<std::string> names;
  bool parenthesized = accept_op("(");
  do {
    names.push_back(expect_name("a variable name"));
  } while (accept_op(","));
  if (parenthesized) expect_op(")");
  return names;
}

StmtPtr Parser::parse_for(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kFor;
  s->line = line;
  s->names = parse_target_names();
  if (!accept_name("in")) error("expected 'in' in the for tag, got " + describe(peek()));
  s->exprs.push_back(parse_tuple_or_expression(false));
  s->exprs.push_back(accept_name("if") ? parse_expression() : nullptr);
  if (is_name("recursive")) error("unsupported construct: recursive for loops");
  expect_block_end();
  std::string end;
  s->bodies.push_back(parse_body({"else", "endfor"}, end));
  if (end == "else") {
    expect_block_end();
    s->bodies.push_back(parse_body({"endfor"}, end));
  }
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_set(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kSet;
  s->line = line;
  std::string first = expect_name("a variable name");
  if (accept_op(".")) {
    s->text = first;  // namespace attribute: set ns.attr = value
    s->names.push_back(expect_name("an attribute name"));
  } else {
    s->names.push_back(first);
    while (accept_op(",")) s->names.push_back(expect_name("a variable name"));
  }
  if (peek().kind == TokenKind::kBlockEnd && s->names.size() == 1 && s->text.empty()) {
    next();
    s->kind = StmtKind::kSetBlock;
    std::string end;
    s->bodies.push_back(parse_body({"endset"}, end));
    expect_block_end();
    return s;
  }
  expect_op("=");
  s->exprs.push_back(parse_tuple_or_expression(true));
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_macro(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kMacro;
  s->line = line;
  s->text = expect_name("a macro name");
  expect_op("(");
  while (!accept_op(")")) {
    if (!s->names.empty()) expect_op(",");
    if (accept_op(")")) break;
    s->names.push_back(expect_name("a parameter name"));
    s->exprs.push_back(accept_op("=") ? parse_expression() : nullptr);
  }
  expect_block_end();
  std::string end;
  s->bodies.push_back(parse_body({"endmacro"}, end));
  if (peek().kind == TokenKind::kName) next();  // {% endmacro name %}
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_call_block(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kCallBlock;
  s->line = line;
  if (accept_op("(")) {
    while (!accept_op(")")) {
      if (!s->names.empty()) expect_op(",");
      s->names.push_back(expect_name("a parameter name"));
    }
  }
  ExprPtr call = parse_expression();
  if (call->kind != ExprKind::kCall) error("the call tag needs a macro call");
  s->exprs.push_back(std::move(call));
  expect_block_end();
  std::string end;
  s->bodies.push_back(parse_body({"endcall"}, end));
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_with_body(StmtKind kind, int line, std::string_view end_tag) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  expect_block_end();
  std::string end;
  s->bodies.push_back(parse_body({end_tag}, end));
  expect_block_end();
  return s;
}

// ---- expressions ----

ExprPtr Parser::parse_tuple_or_expression(bool allow_conditional) {
  int line = peek().line;
  ExprPtr first = parse_expression(allow_conditional);
  if (!is_op(",")) return first;
  auto tuple = node(ExprKind::kList, line);
  tuple->children.push_back(std::move(first));
  while (accept_op(",")) {
    if (peek().kind == TokenKind::kBlockEnd || peek().kind == TokenKind::kVariableEnd || is_op(")"))
      break;
    tuple->children.push_back(parse_expression(allow_conditional));
  }
  return tuple;
}

ExprPtr Parser::parse_expression(bool allow_conditional) {
  DepthGuard guard(*this);
  ExprPtr value = parse_or();
  while (allow_conditional && is_name("if")) {
    int line = next().line;
    auto cond = node(ExprKind::kConditional, line);
    cond->children.push_back(parse_or());
    cond->children.push_back(std::move(value));
    cond->children.push_back(accept_name("else") ? parse_expression() : nullptr);
    value = std::move(cond);
  }
  return value;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    auto b = node(ExprKind::kBinary, next().line, "or");
    b->children.push_back(std::move(left));
    b->children.push_back(parse_and());
    left = std::move(b);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    auto b = node(ExprKind::kBinary, next().line, "and");
    b->children.push_back(std::move(left));
    b->children.push_back(parse_not());
    left = std::move(b);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  DepthGuard guard(*this);
  if (is_name("not")) {
    auto u = node(ExprKind::kUnary, next().line, "not");
    u->children.push_back(parse_not());
    return u;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  ExprPtr left = parse_additive();
  for (;;) {
    std::string op;
    int line = peek().line;
    if (peek().kind == TokenKind::kOperator &&
        (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == ">" ||
         peek().text == "<=" || peek().text == ">=")) {
      op = next().text;
    } else if (is_name("in")) {
      next();
      op = "in";
    } else if (is_name("not") && is_name("in", 1)) {
      next();
      next();
      op = "notin";
    } else {
      return left;
    }
    auto b = node(ExprKind::kBinary, line, op);
    b->children.push_back(std::move(left));
    b->children.push_back(parse_additive());
    left = std::move(b);
  }
}

ExprPtr Parser::parse_additive() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    auto b = node(ExprKind::kBinary, peek().line, next().text);
    b->children.push_back(std::move(left));
    b->children.push_back(parse_concat());
    left = std::move(b);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr left = parse_multiplicative();
  while (is_op("~")) {
    auto b = node(ExprKind::kBinary, next().line, "~");
    b->children.push_back(std::move(left));
    b->children.push_back(parse_multiplicative());
    left = std::move(b);
  }
  return left;
}

ExprPtr Parser::parse_multiplicative() {
  ExprPtr left = parse_power();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    auto b = node(ExprKind::kBinary, peek().line, next().text);
    b->children.push_back(std::move(left));
    b->children.push_back(parse_power());
    left = std::move(b);
  }
  return left;
}

ExprPtr Parser::parse_power() {
  ExprPtr left = parse_unary();
  while (is_op("**")) {
    auto b = node(ExprKind::kBinary, next().line, "**");
    b->children.push_back(std::move(left));
    b->children.push_back(parse_unary());
    left = std::move(b);
  }
  return left;
}

ExprPtr Parser::parse_unary() {
  DepthGuard guard(*this);
  ExprPtr value;
  if (is_op("-") || is_op("+")) {
    auto u = node(ExprKind::kUnary, peek().line, next().text);
    u->children.push_back(parse_unary());
    value = std::move(u);
  } else {
    value = parse_postfix(parse_primary());
  }
  return parse_filters_and_tests(std::move(value));
}

ExprPtr Parser::parse_primary() {
  DepthGuard guard(*this);
  const Token& t = peek();
  int line = t.line;
  if (t.kind == TokenKind::kName) {
    std::string name = next().text;
    auto lit = node(ExprKind::kLiteral, line);
    if (name == "true" || name == "True")
      lit->literal = true;
    else if (name == "false" || name == "False")
      lit->literal = false;
    else if (name == "none" || name == "None")
      lit->literal = None{};
    else
      return node(ExprKind::kName, line, name);
    return lit;
  }
  if (t.kind == TokenKind::kString) {
    std::string text;
    while (peek().kind == TokenKind::kString) text += next().text;  // "a" "b" is "ab"
    auto lit = node(ExprKind::kLiteral, line);
    lit->literal = std::move(text);
    return lit;
  }
  if (t.kind == TokenKind::kInteger || t.kind == TokenKind::kFloat) {
    auto lit = node(ExprKind::kLiteral, line);
    lit->literal = t.kind == TokenKind::kInteger ? Value(t.integer) : Value(t.number);
    next();
    return lit;
  }
  if (accept_op("(")) {
    if (accept_op(")")) return node(ExprKind::kList, line);  // ()
    ExprPtr inner = parse_tuple_or_expression(true);
    expect_op(")");
    return inner;
  }
  if (accept_op("[")) {
    auto list = node(ExprKind::kList, line);
    while (!accept_op("]")) {
      if (!list->children.empty()) expect_op(",");
      if (accept_op("]")) break;
      list->children.push_back(parse_expression());
    }
    return list;
  }
  if (accept_op("{")) {
    auto dict = node(ExprKind::kDict, line);
    while (!accept_op("}")) {
      if (!dict->children.empty()) expect_op(",");
      if (accept_op("}")) break;
      dict->children.push_back(parse_expression());
      expect_op(":");
      dict->children.push_back(parse_expression());
    }
    return dict;
  }
  error("unexpected " + describe(t) + " in an expression");
}

ExprPtr Parser::parse_postfix(ExprPtr value) {
  for (;;) {
    int line = peek().line;
    if (accept_op(".")) {
      auto attr = node(ExprKind::kAttribute, line);
      if (peek().kind == TokenKind::kInteger) {  // foo.0 is foo[0]
        attr->kind = ExprKind::kItem;
        auto index = node(ExprKind::kLiteral, line);
        index->literal = next().integer;
        attr->children.push_back(std::move(value));
        attr->children.push_back(std::move(index));
      } else {
        attr->name = expect_name("an attribute name");
        attr->children.push_back(std::move(value));
      }
      value = std::move(attr);
    } else if (accept_op("[")) {
      value = parse_subscript(std::move(value), line);
    } else if (is_op("(")) {
      next();
      auto call = node(ExprKind::kCall, line);
      call->children.push_back(std::move(value));
      parse_call_arguments(*call);
      value = std::move(call);
    } else {
      return value;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr value, int line) {
  std::vector<ExprPtr> parts(1);
  size_t colons = 0;
  while (!accept_op("]")) {
    if (accept_op(":")) {
      if (++colons > 2) error("a slice takes at most start:stop:step");
      parts.emplace_back();
    } else {
      if (parts.back()) error("expected ':' or ']' in a subscript, got " + describe(peek()));
      parts.back() = parse_expression();
    }
  }
  if (colons == 0) {
    if (!parts[0]) error("empty subscript '[]'");
    auto item = node(ExprKind::kItem, line);
    item->children.push_back(std::move(value));
    item->children.push_back(std::move(parts[0]));
    return item;
  }
  auto slice = node(ExprKind::kSlice, line);
  slice->children.push_back(std::move(value));
  parts.resize(3);
  for (auto& part : parts) slice->children.push_back(std::move(part));
  return slice;
}

void Parser::parse_call_arguments(Expr& call) {
  while (!accept_op(")")) {
    if (call.children.size() > 1) expect_op(",");
    if (accept_op(")")) break;
    if (is_op("*") || is_op("**")) {  // f(*list) / f(**dict): spread when evaluated
      call.keywords.push_back(next().text);
    } else if (peek().kind == TokenKind::kName && is_op("=", 1)) {
      call.keywords.push_back(next().text);
      next();
    } else {
      call.keywords.emplace_back();
    }
    call.children.push_back(parse_expression());
  }
}

ExprPtr Parser::parse_filters_and_tests(ExprPtr value) {
  for (;;) {
    int line = peek().line;
    if (accept_op("|")) {
      auto filter = node(ExprKind::kFilter, line);
      filter->name = expect_name("a filter name");
      while (accept_op(".")) {  // dotted filter names (none are supported, but name them whole)
        filter->name.push_back('.');
        filter->name.append(expect_name("a filter name"));
      }
      filter->children.push_back(std::move(value));
      if (accept_op("(")) parse_call_arguments(*filter);
      value = std::move(filter);
    } else if (accept_name("is")) {
      auto test = node(ExprKind::kTest, line);
      test->negated = accept_name("not");
      test->name = expect_name("a test name");
      test->children.push_back(std::move(value));
      if (accept_op("(")) {
        parse_call_arguments(*test);
      } else {
        const Token& t = peek();
        bool single_argument =
            t.kind == TokenKind::kString || t.kind == TokenKind::kInteger ||
            t.kind == TokenKind::kFloat || is_op("[") || is_op("{") ||
            (t.kind == TokenKind::kName && t.text != "else" && t.text != "or" && t.text != "and" &&
             t.text != "if" && t.text != "is" && t.text != "in" && t.text != "not");
        if (single_argument) {  // `x is divisibleby 3`, `x is sameas false`
          test->keywords.emplace_back();
          test->children.push_back(parse_postfix(parse_primary()));
        }
      }
      value = std::move(test);
    } else {
      return value;
    }
  }
}

}  // namespace

Body parse_template(const std::vector<Token>& tokens, const std::string& source_name) {
  return Parser(tokens, source_name).parse_all();
}

}  // namespace rose::jinja
