#pragma once
// Helpers shared by the tests: a private temporary folder and the message of a rose::Error.
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <system_error>

#include "engine/common/error.h"

namespace rose::test {

// A fresh, empty folder (tmp/roseinfer_test_<tag>_<pid>_<n>[/leaf]), removed with its parent at
// the end of the scope. `leaf` lets a test name the folder itself (a model folder's name is its
// id).
struct TempDir {
  std::filesystem::path root;
  std::filesystem::path path;
  explicit TempDir(const std::string& tag, const std::string& leaf = "") {
    static int counter = 0;
    root = std::filesystem::temp_directory_path() /
           ("roseinfer_test_" + tag + "_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter++));
    path = leaf.empty() ? root : root / leaf;
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// The message of the rose::Error that `action` throws, or "<no error>".
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace rose::test
