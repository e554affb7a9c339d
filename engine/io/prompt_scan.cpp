#include "engine/io/prompt_scan.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "engine/common/error.h"

namespace rose {
namespace {

struct IdSighting {
  uint64_t hash = 0;
  int line = 0;
};

// Lines whose id repeats an earlier line's, found from hashes sorted with their lines; a hash seen
// twice is confirmed with the real ids in one more pass over just those lines, so a collision of
// two different ids is never reported.
std::vector<SkippedLine> repeated_ids(const std::filesystem::path& path,
                                      std::vector<IdSighting> sightings) {
  std::sort(sightings.begin(), sightings.end(), [](const IdSighting& a, const IdSighting& b) {
    return a.hash != b.hash ? a.hash < b.hash : a.line < b.line;
  });
  std::unordered_set<uint64_t> suspects;
  for (size_t i = 1; i < sightings.size(); ++i) {
    if (sightings[i].hash == sightings[i - 1].hash) suspects.insert(sightings[i].hash);
  }
  std::vector<SkippedLine> repeats;
  if (suspects.empty()) return repeats;
  std::unordered_map<std::string, int> first_line;
  PromptLineReader reader(path);
  PromptLine line;
  while (reader.next(line)) {
    if (!line.spec || !suspects.contains(request_id_hash(line.spec->id))) continue;
    const auto [it, inserted] = first_line.emplace(line.spec->id, line.line);
    if (inserted) continue;
    repeats.push_back(SkippedLine{
        line.line, fmt::format("{}:{}: field '{}': duplicate id '{}' (first on line {})",
                               path.string(), line.line, line.spec->custom_id ? "custom_id" : "id",
                               line.spec->id, it->second)});
  }
  return repeats;
}

void fail_on_empty(const PromptFileScan& scan, const std::string& source) {
  if (scan.num_requests > 0) return;
  if (scan.skipped.empty()) fail("{}: no requests (the file has no non-blank lines)", source);
  fail("{}: no valid requests ({} lines skipped; the first: {})", source, scan.skipped.size(),
       scan.skipped.front().message);
}

}  // namespace

uint64_t request_id_hash(const std::string& id) { return XXH3_64bits(id.data(), id.size()); }

PromptFileScan scan_prompt_file(const std::filesystem::path& path, bool skip_invalid) {
  PromptFileScan scan;
  std::vector<IdSighting> sightings;
  PromptLineReader reader(path);
  PromptLine line;
  while (reader.next(line)) {
    if (!line.spec) {
      scan.skipped.push_back(SkippedLine{line.line, line.error});
      // Without skip_invalid only an earlier repeated id could come first: no need to read on.
      if (!skip_invalid) break;
      continue;
    }
    sightings.push_back({request_id_hash(line.spec->id), line.line});
    scan.all_have_arrival_time &= line.spec->arrival_time.has_value();
    scan.any_custom_id |= line.spec->custom_id.has_value();
  }
  const auto parsed = int64_t(sightings.size());
  std::vector<SkippedLine> repeats = repeated_ids(path, std::move(sightings));
  scan.skipped.insert(scan.skipped.end(), repeats.begin(), repeats.end());
  std::sort(scan.skipped.begin(), scan.skipped.end(),
            [](const SkippedLine& a, const SkippedLine& b) { return a.line < b.line; });
  if (!skip_invalid && !scan.skipped.empty()) throw Error(scan.skipped.front().message);
  scan.num_requests = parsed - int64_t(repeats.size());
  fail_on_empty(scan, path.string());
  return scan;
}

}  // namespace rose
