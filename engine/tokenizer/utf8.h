#pragma once
// Moved to engine/common/utf8.h (one decoder for the whole tree); kept so tokenizer code that
// includes this path still builds.
#include "engine/common/utf8.h"
