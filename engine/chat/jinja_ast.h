#pragma once
// Jinja syntax tree: expressions and statements as the parser builds them and the evaluator walks.
#include <memory>
#include <string>
#include <vector>

#include "engine/chat/jinja_value.h"

namespace rose::jinja {

enum class ExprKind {
  kLiteral,     // literal
  kName,        // name
  kList,        // children (also tuples)
  kDict,        // children: key, value, key, value, ...
  kAttribute,   // children[0] . name
  kItem,        // children[0] [ children[1] ]
  kSlice,       // children[0] [ children[1] : children[2] : children[3] ] (null for absent)
  kCall,        // children[0] ( children[1..] ), keyword names aligned with the arguments
  kFilter,      // children[0] | name ( children[1..] )
  kTest,        // children[0] is [not] name ( children[1..] )
  kUnary,       // name ("not", "-", "+") children[0]
  kBinary,      // children[0] name children[1]: or and == != < > <= >= in notin + - ~ * / // % **
  kConditional  // children[1] if children[0] else children[2] (null: undefined)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
struct Expr {
  ExprKind kind;
  int line;
  std::string name;
  Value literal;
  std::vector<ExprPtr> children;
  std::vector<std::string>
      keywords;          // kCall/kFilter/kTest: per argument (children[1..]), "" = positional,
                         // "*" / "**" = a list / dict spread into the arguments
  bool negated = false;  // kTest: "is not"
};

enum class StmtKind {
  kText,
  kPrint,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kCallBlock,
  kBreak,
  kContinue,
  kGeneration
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;
struct Stmt {
  StmtKind kind;
  int line;
  std::string text;  // kText: the text; kMacro: macro name
  std::vector<std::string>
      names;  // kFor: targets; kSet: target (name, or namespace + attribute); kMacro: params
  std::vector<ExprPtr>
      exprs;  // kPrint/kSet: value; kIf: conditions; kFor: iterable, filter; kMacro: defaults
  std::vector<Body> bodies;  // kIf: one per condition, then else; kFor: body, else; others: body
};

}  // namespace rose::jinja
