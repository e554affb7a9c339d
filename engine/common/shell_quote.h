#pragma once
// Shell quoting for command lines recorded in results files.
#include <string>

namespace rose {

// argv joined with spaces, each argument shell-quoted when needed, so it can be pasted back.
std::string join_command(int argc, const char* const* argv);

}  // namespace rose
