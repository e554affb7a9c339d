#pragma once
// Jinja evaluator: walks a parsed template with a set of global variables and renders its text,
// bounded by a step limit, a call-depth limit and an output-size limit.
#include <cstdint>
#include <string>

#include "engine/chat/jinja_ast.h"

namespace rose::jinja {

struct RenderLimits {
  int64_t max_steps = 5'000'000;  // expressions and statements evaluated
  int max_call_depth = 100;       // nested macro calls
  size_t max_output_bytes = size_t{64} << 20;
};

// Throws rose::Error "NAME:LINE: ..." for errors, and "NAME:LINE: raise_exception: MESSAGE" when
// the template calls raise_exception(MESSAGE).
std::string render(const Body& template_body, const std::string& source_name,
                   const ValueDict& globals, const RenderLimits& limits);

}  // namespace rose::jinja
