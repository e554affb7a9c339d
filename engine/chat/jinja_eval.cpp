#include "engine/chat/jinja_eval.h"

#include <fmt/format.h>

#include <climits>
#include <map>

#include "engine/chat/jinja_builtins.h"
#include "engine/common/error.h"

namespace rose::jinja {
namespace {

struct Scope;
using ScopePtr = std::shared_ptr<Scope>;
struct Scope {
  std::map<std::string, Value, std::less<>> vars;
  ScopePtr parent;
};

ScopePtr child_scope(const ScopePtr& parent) {
  auto scope = std::make_shared<Scope>();
  scope->parent = parent;
  return scope;
}

constexpr int64_t kMaxRangeLength = 1'000'000;

class Evaluator {
 public:
  Evaluator(const std::string& name, const RenderLimits& limits) : name_(name), limits_(limits) {}
  std::string run(const Body& body, const ValueDict& globals);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec_body(const Body& body, std::string& out, const ScopePtr& scope);
  Flow exec(const Stmt& stmt, std::string& out, const ScopePtr& scope);
  Flow exec_unchecked(const Stmt& stmt, std::string& out, const ScopePtr& scope);
  void exec_for(const Stmt& stmt, std::string& out, const ScopePtr& scope);
  void exec_set(const Stmt& stmt, const ScopePtr& scope);
  void exec_call_block(const Stmt& stmt, std::string& out, const ScopePtr& scope);
  Value make_macro(const Stmt& stmt, const ScopePtr& closure);
  // Closures hold their scope weakly (a macro lives in the scope it captures: a strong pointer
  // would be a cycle); the evaluator keeps those scopes, and every namespace, until the render
  // ends.
  std::weak_ptr<Scope> keep(const ScopePtr& scope) {
    kept_scopes_.push_back(scope);
    return scope;
  }
  static ScopePtr lock(const std::weak_ptr<Scope>& scope) {
    ScopePtr locked = scope.lock();
    if (!locked) throw EvalError("a macro was called after its render ended");
    return locked;
  }
  Value call_macro(const Stmt& stmt, const ScopePtr& closure, CallArgs& args);
  Value make_loop(const ValueList& items, size_t index);
  void bind_targets(const std::vector<std::string>& names, const Value& item, Scope& scope);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value eval_call(const Expr& e, const ScopePtr& scope);
  CallArgs eval_arguments(const Expr& e, const ScopePtr& scope);
  Value eval_binary(const Expr& e, const ScopePtr& scope);
  Value eval_unary(const Expr& e, const ScopePtr& scope);
  Value lookup(std::string_view name, const ScopePtr& scope) const;
  void add_builtins(Scope& root);

  void step() { charge_work(1); }
  void append(std::string& out, std::string_view text) {
    charge_work(static_cast<int64_t>(text.size() / 256));
    if (out.size() + text.size() > limits_.max_output_bytes)
      throw EvalError(fmt::format("output larger than {} bytes", limits_.max_output_bytes));
    out += text;
  }

  const std::string& name_;
  const RenderLimits& limits_;
  int call_depth_ = 0;
  std::vector<ScopePtr> kept_scopes_;
  std::vector<std::shared_ptr<Namespace>> namespaces_;

 public:
  ~Evaluator() {
    for (auto& ns : namespaces_) ns->attributes.clear();  // {% set ns.self = ns %} would be a cycle
  }
};

std::string Evaluator::run(const Body& body, const ValueDict& globals) {
  WorkMeter meter(limits_.max_steps);
  auto root = std::make_shared<Scope>();
  add_builtins(*root);
  for (const auto& [k, v] : globals) root->vars[k] = v;
  auto top = child_scope(root);  // template variables shadow globals without replacing them
  std::string out;
  exec_body(body, out, top);
  return out;
}

void Evaluator::add_builtins(Scope& root) {
  root.vars["range"] = Value::function("range", [](CallArgs& a) {
    std::vector<int64_t> bounds;
    for (const Value& v : a.positional) {
      if (!v.is_int()) throw EvalError("range() takes integers");
      bounds.push_back(v.as_int());
    }
    if (bounds.empty() || bounds.size() > 3) throw EvalError("range() takes 1 to 3 arguments");
    int64_t start = bounds.size() == 1 ? 0 : bounds[0],
            stop = bounds.size() == 1 ? bounds[0] : bounds[1];
    int64_t stride = bounds.size() == 3 ? bounds[2] : 1;
    if (stride == 0) throw EvalError("range() arg 3 must not be zero");
    ValueList items;
    for (int64_t i = start; stride > 0 ? i < stop : i > stop; i += stride) {
      if (static_cast<int64_t>(items.size()) >= kMaxRangeLength)
        throw EvalError(fmt::format("range() longer than {} items", kMaxRangeLength));
      items.emplace_back(i);
    }
    return Value(std::move(items));
  });
  root.vars["namespace"] = Value::function("namespace", [this](CallArgs& a) {
    Value ns;
    namespaces_.push_back(std::make_shared<Namespace>());
    ns.data = namespaces_.back();
    for (const Value& v : a.positional)
      if (v.is_dict()) ns.as_namespace().attributes = v.as_dict();
    for (const auto& [k, v] : a.keyword) ns.as_namespace().attributes.emplace_back(k, v);
    return ns;
  });
  root.vars["dict"] = Value::function("dict", [](CallArgs& a) {
    ValueDict d = a.positional.size() == 1 && a.positional[0].is_dict() ? a.positional[0].as_dict()
                                                                        : ValueDict{};
    for (const auto& [k, v] : a.keyword) d.emplace_back(k, v);
    return Value(std::move(d));
  });
}

Value Evaluator::lookup(std::string_view name, const ScopePtr& scope) const {
  for (const Scope* s = scope.get(); s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Value::undefined(std::string(name));
}

Evaluator::Flow Evaluator::exec_body(const Body& body, std::string& out, const ScopePtr& scope) {
  for (const StmtPtr& stmt : body) {
    Flow flow = exec(*stmt, out, scope);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

// Errors from expressions carry no location: the innermost statement adds template name and line.
Evaluator::Flow Evaluator::exec(const Stmt& stmt, std::string& out, const ScopePtr& scope) {
  try {
    return exec_unchecked(stmt, out, scope);
  } catch (const TemplateRaised& e) {
    fail("{}:{}: raise_exception: {}", name_, stmt.line, e.what());
  } catch (const EvalError& e) {
    fail("{}:{}: {}", name_, stmt.line, e.what());
  }
}

Evaluator::Flow Evaluator::exec_unchecked(const Stmt& stmt, std::string& out,
                                          const ScopePtr& scope) {
  step();
  switch (stmt.kind) {
    case StmtKind::kText:
      append(out, stmt.text);
      break;
    case StmtKind::kPrint:
      append(out, to_display_string(eval(*stmt.exprs[0], scope)));
      break;
    case StmtKind::kIf:
      for (size_t i = 0; i < stmt.bodies.size(); ++i)
        if (i >= stmt.exprs.size() || truthy(eval(*stmt.exprs[i], scope)))
          return exec_body(stmt.bodies[i], out, scope);
      break;
    case StmtKind::kFor:
      exec_for(stmt, out, scope);
      break;
    case StmtKind::kSet:
      exec_set(stmt, scope);
      break;
    case StmtKind::kSetBlock: {
      std::string captured;
      exec_body(stmt.bodies[0], captured, scope);
      scope->vars[stmt.names[0]] = Value(std::move(captured));
      break;
    }
    case StmtKind::kMacro:
      scope->vars[stmt.text] = make_macro(stmt, scope);
      break;
    case StmtKind::kCallBlock:
      exec_call_block(stmt, out, scope);
      break;
    case StmtKind::kGeneration:
      return exec_body(stmt.bodies[0], out, scope);
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

void Evaluator::bind_targets(const std::vector<std::string>& names, const Value& item,
                             Scope& scope) {
  if (names.size() == 1) {
    scope.vars[names[0]] = item;
    return;
  }
  ValueList parts = iterate(item);
  if (parts.size() != names.size())
    throw EvalError(
        fmt::format("cannot unpack {} values into {} names", parts.size(), names.size()));
  for (size_t i = 0; i < names.size(); ++i) scope.vars[names[i]] = parts[i];
}

Value Evaluator::make_loop(const ValueList& items, size_t index) {
  int64_t length = static_cast<int64_t>(items.size()), i = static_cast<int64_t>(index);
  ValueDict loop = {{"index", Value(i + 1)},
                    {"index0", Value(i)},
                    {"revindex", Value(length - i)},
                    {"revindex0", Value(length - i - 1)},
                    {"first", Value(i == 0)},
                    {"last", Value(i == length - 1)},
                    {"length", Value(length)},
                    {"depth", Value(1)},
                    {"depth0", Value(0)}};
  if (index > 0) loop.emplace_back("previtem", items[index - 1]);
  if (index + 1 < items.size()) loop.emplace_back("nextitem", items[index + 1]);
  loop.emplace_back("cycle", Value::function("loop.cycle", [i](CallArgs& a) {
                      if (a.positional.empty())
                        throw EvalError("loop.cycle() needs at least one value");
                      return a.positional[static_cast<size_t>(i) % a.positional.size()];
                    }));
  return Value(std::move(loop));
}

void Evaluator::exec_for(const Stmt& stmt, std::string& out, const ScopePtr& scope) {
  ValueList items;
  for (Value& item : iterate(eval(*stmt.exprs[0], scope))) {
    if (stmt.exprs[1]) {  // {% for x in xs if cond %}: filtered before loop.* counts
      auto test_scope = child_scope(scope);
      bind_targets(stmt.names, item, *test_scope);
      if (!truthy(eval(*stmt.exprs[1], test_scope))) continue;
    }
    items.push_back(std::move(item));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    step();  // an empty body still costs a step, so nested loops stay bounded
    auto body_scope = child_scope(scope);
    body_scope->vars["loop"] = make_loop(items, i);
    bind_targets(stmt.names, items[i], *body_scope);
    if (exec_body(stmt.bodies[0], out, body_scope) == Flow::kBreak) break;
  }
  if (items.empty() && stmt.bodies.size() > 1) exec_body(stmt.bodies[1], out, child_scope(scope));
}

void Evaluator::exec_set(const Stmt& stmt, const ScopePtr& scope) {
  Value value = eval(*stmt.exprs[0], scope);
  if (stmt.text.empty()) {
    bind_targets(stmt.names, value, *scope);
    return;
  }
  Value target = lookup(stmt.text, scope);
  if (!target.is_namespace())
    throw EvalError(fmt::format("cannot assign attribute on non-namespace object '{}'", stmt.text));
  ValueDict& attributes = target.as_namespace().attributes;
  for (auto& [k, v] : attributes)
    if (k == stmt.names[0]) {
      v = std::move(value);
      return;
    }
  attributes.emplace_back(stmt.names[0], std::move(value));
}

Value Evaluator::make_macro(const Stmt& stmt, const ScopePtr& closure) {
  return Value::function(stmt.text, [this, &stmt, weak = keep(closure)](CallArgs& args) {
    return call_macro(stmt, lock(weak), args);
  });
}

Value Evaluator::call_macro(const Stmt& stmt, const ScopePtr& closure, CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth)
    throw EvalError(fmt::format("macro calls nested deeper than {} (runaway recursion?)",
                                limits_.max_call_depth));
  if (args.positional.size() > stmt.names.size())
    throw EvalError(fmt::format("macro '{}' takes {} arguments, got {}", stmt.text,
                                stmt.names.size(), args.positional.size()));
  auto scope = child_scope(closure);
  for (size_t i = 0; i < stmt.names.size(); ++i) {
    Value v = args.get(i, stmt.names[i]);
    if (v.is_undefined() && stmt.exprs[i]) v = eval(*stmt.exprs[i], scope);
    scope->vars[stmt.names[i]] = v.is_undefined() ? Value::undefined(stmt.names[i]) : v;
  }
  if (const Value* caller = dict_find(args.keyword, "caller")) scope->vars["caller"] = *caller;
  ++call_depth_;
  std::string out;
  try {
    exec_body(stmt.bodies[0], out, scope);
  } catch (...) {
    --call_depth_;
    throw;
  }
  --call_depth_;
  return out;
}

void Evaluator::exec_call_block(const Stmt& stmt, std::string& out, const ScopePtr& scope) {
  Value caller = Value::function("caller", [this, &stmt, weak = keep(scope)](CallArgs& args) {
    auto body_scope = child_scope(lock(weak));
    for (size_t i = 0; i < stmt.names.size(); ++i)
      body_scope->vars[stmt.names[i]] = args.get(i, stmt.names[i]);
    std::string text;
    exec_body(stmt.bodies[0], text, body_scope);
    return Value(std::move(text));
  });
  const Expr& call = *stmt.exprs[0];
  Value callee = eval(*call.children[0], scope);
  if (!callee.is_callable()) throw EvalError("the call tag needs a macro");
  CallArgs args = eval_arguments(call, scope);
  args.keyword.emplace_back("caller", caller);
  append(out, to_display_string(callee.as_callable().call(args)));
}

Value Evaluator::eval(const Expr& e, const ScopePtr& scope) {
  step();
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.literal;
    case ExprKind::kName:
      return lookup(e.name, scope);
    case ExprKind::kList: {
      ValueList items;
      for (const ExprPtr& child : e.children) items.push_back(eval(*child, scope));
      return items;
    }
    case ExprKind::kDict: {
      ValueDict dict;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        Value key = eval(*e.children[i], scope);
        if (!key.is_string())
          throw EvalError("unsupported construct: a dict key that is not a string");
        Value value = eval(*e.children[i + 1], scope);
        bool replaced = false;
        for (auto& [k, v] : dict)
          if (k == key.as_string()) v = value, replaced = true;
        if (!replaced) dict.emplace_back(key.as_string(), std::move(value));
      }
      return dict;
    }
    case ExprKind::kAttribute:
      return get_attribute(eval(*e.children[0], scope), e.name);
    case ExprKind::kItem:
      return get_item(eval(*e.children[0], scope), eval(*e.children[1], scope));
    case ExprKind::kSlice: {
      Value object = eval(*e.children[0], scope);
      auto part = [&](size_t i) { return e.children[i] ? eval(*e.children[i], scope) : Value(); };
      return slice_value(object, part(1), part(2), part(3));
    }
    case ExprKind::kCall:
      return eval_call(e, scope);
    case ExprKind::kFilter: {
      Value input = eval(*e.children[0], scope);
      CallArgs args = eval_arguments(e, scope);
      return apply_filter(e.name, input, args);
    }
    case ExprKind::kTest: {
      Value input = eval(*e.children[0], scope);
      CallArgs args = eval_arguments(e, scope);
      return apply_test(e.name, input, args) != e.negated;
    }
    case ExprKind::kUnary:
      return eval_unary(e, scope);
    case ExprKind::kBinary:
      return eval_binary(e, scope);
    case ExprKind::kConditional:
      if (truthy(eval(*e.children[0], scope))) return eval(*e.children[1], scope);
      return e.children[2] ? eval(*e.children[2], scope) : Value();
  }
  return Value();
}

CallArgs Evaluator::eval_arguments(const Expr& e, const ScopePtr& scope) {
  CallArgs args;
  for (size_t i = 1; i < e.children.size(); ++i) {
    Value v = eval(*e.children[i], scope);
    const std::string& keyword = e.keywords[i - 1];
    if (keyword.empty()) {
      args.positional.push_back(std::move(v));
    } else if (keyword == "*") {
      for (Value& item : iterate(v)) args.positional.push_back(std::move(item));
    } else if (keyword == "**") {
      if (!v.is_dict())
        throw EvalError(fmt::format("argument after ** must be a mapping, not {}", type_name(v)));
      for (const auto& entry : v.as_dict()) args.keyword.push_back(entry);
    } else {
      args.keyword.emplace_back(keyword, std::move(v));
    }
  }
  return args;
}

Value Evaluator::eval_call(const Expr& e, const ScopePtr& scope) {
  Value callee = eval(*e.children[0], scope);
  if (!callee.is_callable()) {
    std::string what = e.children[0]->kind == ExprKind::kName        ? e.children[0]->name
                       : e.children[0]->kind == ExprKind::kAttribute ? e.children[0]->name
                                                                     : "expression";
    if (callee.is_undefined()) {
      bool known_name = e.children[0]->kind == ExprKind::kName;
      throw EvalError(
          known_name
              ? fmt::format("unsupported construct: '{}' is undefined (not a known function)", what)
              : fmt::format("unsupported construct: method '{}' is undefined", what));
    }
    throw EvalError(fmt::format("'{}' object is not callable", type_name(callee)));
  }
  CallArgs args = eval_arguments(e, scope);
  return callee.as_callable().call(args);
}

Value Evaluator::eval_unary(const Expr& e, const ScopePtr& scope) {
  Value operand = eval(*e.children[0], scope);
  if (e.name == "not") return !truthy(operand);
  require_defined(operand);
  if (operand.is_bool()) operand = Value(int64_t{operand.as_bool()});
  if (!operand.is_number())
    throw EvalError(fmt::format("bad operand type for unary {}: '{}'", e.name, type_name(operand)));
  if (e.name == "+") return operand;
  if (operand.is_float()) return -operand.as_number();
  if (operand.as_int() == INT64_MIN) throw EvalError("integer overflow");
  return -operand.as_int();
}

Value Evaluator::eval_binary(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.children[0], scope);
  if (e.name == "and") return truthy(left) ? eval(*e.children[1], scope) : left;
  if (e.name == "or") return truthy(left) ? left : eval(*e.children[1], scope);
  return binary_operation(e.name, left, eval(*e.children[1], scope));
}

}  // namespace

std::string render(const Body& template_body, const std::string& source_name,
                   const ValueDict& globals, const RenderLimits& limits) {
  try {
    return Evaluator(source_name, limits).run(template_body, globals);
  } catch (const TemplateRaised& e) {
    fail("{}: raise_exception: {}", source_name, e.what());
  } catch (const EvalError& e) {
    fail("{}: {}", source_name, e.what());
  }
}

}  // namespace rose::jinja
