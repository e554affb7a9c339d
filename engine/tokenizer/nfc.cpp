#include "engine/tokenizer/nfc.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

#include "engine/common/utf8.h"
#include "engine/tokenizer/nfc_tables.h"

namespace rose {

namespace {

// Hangul syllables decompose and compose by arithmetic (Unicode 3.12).
constexpr char32_t kHangulBase = 0xAC00, kLeadBase = 0x1100, kVowelBase = 0x1161,
                   kTrailBase = 0x11A7;
constexpr int kVowelCount = 21, kTrailCount = 28, kSyllableCount = 11172;

// A decoded unit: a code point, or (when invalid) one raw byte that must come out unchanged.
struct Unit {
  char32_t code_point;
  bool raw_byte;
  uint8_t ccc;
};

uint8_t combining_class(char32_t c) {
  if (c < 0x300) return 0;
  const auto* end = std::end(nfc_data::kCombiningClasses);
  const auto* it = std::lower_bound(
      std::begin(nfc_data::kCombiningClasses), end, c,
      [](const nfc_data::CombiningClass& e, char32_t v) { return e.code_point < v; });
  return it != end && it->code_point == c ? it->ccc : 0;
}

void decompose(char32_t c, std::vector<Unit>& out) {
  if (c >= kHangulBase && c < kHangulBase + kSyllableCount) {
    const int index = static_cast<int>(c - kHangulBase);
    out.push_back({kLeadBase + index / (kVowelCount * kTrailCount), false, 0});
    out.push_back({kVowelBase + (index % (kVowelCount * kTrailCount)) / kTrailCount, false, 0});
    if (index % kTrailCount != 0) out.push_back({kTrailBase + index % kTrailCount, false, 0});
    return;
  }
  const auto* end = std::end(nfc_data::kDecompositions);
  const auto* it = std::lower_bound(
      std::begin(nfc_data::kDecompositions), end, c,
      [](const nfc_data::Decomposition& e, char32_t v) { return e.code_point < v; });
  if (it == end || it->code_point != c) {
    out.push_back({c, false, combining_class(c)});
    return;
  }
  decompose(it->first, out);
  if (it->second != 0) decompose(it->second, out);
}

// The primary composite of a pair, or 0.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kLeadBase && first < kLeadBase + 19 && second >= kVowelBase &&
      second < kVowelBase + kVowelCount) {
    return kHangulBase + ((first - kLeadBase) * kVowelCount + (second - kVowelBase)) * kTrailCount;
  }
  if (first >= kHangulBase && first < kHangulBase + kSyllableCount &&
      (first - kHangulBase) % kTrailCount == 0 && second > kTrailBase &&
      second < kTrailBase + kTrailCount) {
    return first + (second - kTrailBase);
  }
  const auto* end = std::end(nfc_data::kCompositions);
  const auto* it =
      std::lower_bound(std::begin(nfc_data::kCompositions), end, std::pair{first, second},
                       [](const nfc_data::Composition& e, std::pair<char32_t, char32_t> v) {
                         return e.first != v.first ? e.first < v.first : e.second < v.second;
                       });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

}  // namespace

std::string to_nfc(std::string_view text) {
  // Text below U+0300 is already NFC and composes with nothing before it: the common case.
  bool simple = true;
  for (char c : text) {
    if (static_cast<uint8_t>(c) >= 0xCC) {
      simple = false;
      break;
    }
  }
  if (simple) return std::string(text);

  std::vector<Unit> units;  // (code points,) fully decomposed
  units.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const utf8::Scan s = utf8::scan(text.substr(i));
    if (s.kind == utf8::Scan::kValid) {
      decompose(s.code_point, units);
    } else {
      for (size_t k = 0; k < s.length; ++k) {
        units.push_back({static_cast<uint8_t>(text[i + k]), true, 0});
      }
    }
    i += s.length;
  }
  // Canonical order: a stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < units.size();) {
    if (units[i].ccc == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < units.size() && units[j].ccc != 0) ++j;
    std::stable_sort(units.begin() + i, units.begin() + j,
                     [](const Unit& a, const Unit& b) { return a.ccc < b.ccc; });
    i = j;
  }
  // Canonical composition: a character joins the last starter unless something between them has
  // the same or a higher class (or is a starter).
  std::vector<Unit> composed;
  composed.reserve(units.size());
  int64_t starter = -1;  // index in composed of the last starter, -1 when none can compose
  uint8_t last_ccc = 0;
  for (const Unit& u : units) {
    if (u.raw_byte) {
      composed.push_back(u);
      starter = -1;
      continue;
    }
    if (starter >= 0) {
      const bool blocked = composed.size() - 1 != static_cast<size_t>(starter) &&
                           (last_ccc == 0 || last_ccc >= u.ccc);
      if (!blocked) {
        if (char32_t c = compose(composed[starter].code_point, u.code_point)) {
          composed[starter].code_point = c;
          continue;
        }
      }
    }
    if (u.ccc == 0) starter = static_cast<int64_t>(composed.size());
    last_ccc = u.ccc;
    composed.push_back(u);
  }
  std::string out;
  out.reserve(text.size());
  for (const Unit& u : composed) {
    if (u.raw_byte) {
      out.push_back(static_cast<char>(u.code_point));
    } else {
      utf8::append_code_point(out, u.code_point);
    }
  }
  return out;
}

}  // namespace rose
