#pragma once
// Jinja parser: tokens to a statement tree, with errors naming the template, the line and the
// construct (an unbalanced tag, an unknown tag, an unsupported expression).
#include <string>
#include <vector>

#include "engine/chat/jinja_ast.h"
#include "engine/chat/jinja_lexer.h"

namespace rose::jinja {

Body parse_template(const std::vector<Token>& tokens, const std::string& source_name);

}  // namespace rose::jinja
