#include "engine/model/model_source.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "engine/common/error.h"
#include "engine/model/presets.h"

namespace rose {
namespace fs = std::filesystem;

namespace {

std::string lookup(const EnvLookup& env, const std::string& key) {
  const auto it = env.find(key);
  return it == env.end() ? "" : it->second;
}

bool is_gguf_path(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == ".gguf";
}

std::vector<fs::path> gguf_files_in(const fs::path& folder) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    if (entry.is_regular_file(ec) && is_gguf_path(entry.path())) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

// A folder is a Hugging Face model when it has config.json; a GGUF repo holds .gguf files only.
ModelSource from_folder(const std::string& model, const fs::path& folder,
                        const std::string& origin) {
  if (fs::exists(folder / "config.json"))
    return {ModelSourceKind::kHfFolder, model, folder, origin};
  const auto ggufs = gguf_files_in(folder);
  if (ggufs.size() == 1) return {ModelSourceKind::kGguf, model, ggufs[0], origin};
  if (ggufs.size() > 1) {
    std::string names;
    for (const auto& g : ggufs) names += (names.empty() ? "" : ", ") + g.filename().string();
    fail("--model {}: {} holds several GGUF files ({}); name one of them", model, folder.string(),
         names);
  }
  fail("--model {}: {} has no config.json and no .gguf file", model, folder.string());
}

// models--ORG--NAME/refs/main names the snapshot; without it, a lone snapshot is taken.
std::optional<fs::path> cached_snapshot(const fs::path& repo_dir, const std::string& model) {
  std::ifstream ref(repo_dir / "refs" / "main");
  std::string revision;
  if (ref && std::getline(ref, revision) && !revision.empty()) {
    const fs::path snapshot = repo_dir / "snapshots" / revision;
    if (fs::is_directory(snapshot)) return snapshot;
  }
  std::vector<fs::path> snapshots;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(repo_dir / "snapshots", ec)) {
    if (entry.is_directory(ec)) snapshots.push_back(entry.path());
  }
  if (snapshots.size() == 1) return snapshots[0];
  if (snapshots.size() > 1) {
    fail("--model {}: {} holds {} snapshots and no refs/main; pass the snapshot folder itself",
         model, repo_dir.string(), snapshots.size());
  }
  return std::nullopt;
}

bool looks_like_repo_id(const std::string& model) {
  const auto slash = model.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < model.size() &&
         model.find('/', slash + 1) == std::string::npos && model[0] != '.';
}

}  // namespace

EnvLookup process_environment() {
  EnvLookup env;
  for (const char* key : {"HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"}) {
    if (const char* value = std::getenv(key)) env[key] = value;
  }
  return env;
}

fs::path hf_hub_cache(const EnvLookup& env) {
  if (const auto hub = lookup(env, "HF_HUB_CACHE"); !hub.empty()) return hub;
  if (const auto home = lookup(env, "HF_HOME"); !home.empty()) return fs::path(home) / "hub";
  if (const auto xdg = lookup(env, "XDG_CACHE_HOME"); !xdg.empty()) {
    return fs::path(xdg) / "huggingface" / "hub";
  }
  return fs::path(lookup(env, "HOME")) / ".cache" / "huggingface" / "hub";
}

ModelSource resolve_model_source(const std::string& model, const EnvLookup& env) {
  if (model.empty()) fail("--model: empty name");
  if (preset_config(model)) return {ModelSourceKind::kPreset, model, {}, "preset"};
  const fs::path path(model);
  if (fs::is_regular_file(path)) {
    if (!is_gguf_path(path)) {
      fail("--model {}: a file must be a .gguf model (a Hugging Face model is a folder)", model);
    }
    return {ModelSourceKind::kGguf, model, path, "path"};
  }
  if (fs::is_directory(path)) return from_folder(model, path, "path");
  if (looks_like_repo_id(model)) {
    const fs::path cache = hf_hub_cache(env);
    const std::string org = model.substr(0, model.find('/'));
    const std::string name = model.substr(model.find('/') + 1);
    const fs::path repo_dir = cache / ("models--" + org + "--" + name);
    if (fs::is_directory(repo_dir)) {
      if (const auto snapshot = cached_snapshot(repo_dir, model)) {
        return from_folder(model, *snapshot, "Hugging Face cache (" + snapshot->string() + ")");
      }
    }
    fail(
        "--model {}: not a preset ({}), not a file or folder, and not in the local Hugging Face "
        "cache ({}); roseinfer never downloads models",
        model, preset_names_text(), repo_dir.string());
  }
  fail("unknown model '{}': not a preset ({}), a .gguf file or a model folder", model,
       preset_names_text());
}

}  // namespace rose
