#pragma once
// Parsing model-side JSON files (config.json, tokenizer_config.json, tokenizer.json) as the Python
// tools that write them do: integers beyond 64 bits are read as doubles, not refused.
#include <simdjson.h>

#include <string>
#include <string_view>

namespace rose {

// `text` with every integer literal outside the int64/uint64 range turned into a float literal
// (".0" appended), so simdjson reads it as a double. transformers writes tokenizer_config.json's
// model_max_length as int(1e30) = 1000000000000000019884624838656, which simdjson 3.0 refuses
// (NUMBER_ERROR; BIGINT_ERROR in later versions) and Python's json reads as an int.
std::string widen_big_json_integers(std::string_view text);

// Parses `text` into `root` (owned by `parser`); on a number error parses the widened text instead
// (a number that is malformed, not just big, fails the second parse the same way).
simdjson::error_code parse_json_widening(simdjson::dom::parser& parser, std::string_view text,
                                         simdjson::dom::element& root);

}  // namespace rose
