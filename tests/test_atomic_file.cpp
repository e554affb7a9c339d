// Atomic output files: the target holds the old content or the whole new content, and no temporary
// file is left behind, whether the write commits, throws, or the process is interrupted.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "engine/common/error.h"
#include "engine/io/atomic_file.h"

using namespace rose;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int entries_in(const fs::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++n;
  return n;
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) : path(fs::temp_directory_path() / name) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("a committed write replaces the file and leaves no temporary") {
  TempDir dir("roseinfer_test_atomic_commit");
  const fs::path target = dir.path / "out.jsonl";
  write_file_atomically(target, "first\n");
  CHECK(slurp(target) == "first\n");
  write_file_atomically(target, "second, longer\n");
  CHECK(slurp(target) == "second, longer\n");
  CHECK(entries_in(dir.path) == 1);
  CHECK(live_temp_file_count() == 0);
}

TEST_CASE("the temporary sits beside the target and is named FILE.tmp.<pid>") {
  TempDir dir("roseinfer_test_atomic_name");
  const fs::path target = dir.path / "r.json";
  AtomicFile file(target);
  CHECK(file.temp_path() == dir.path / ("r.json.tmp." + std::to_string(::getpid())));
  CHECK(fs::exists(file.temp_path()));
  CHECK_FALSE(fs::exists(target));
  CHECK(live_temp_file_count() == 1);
  file.write("x");
  file.commit();
  CHECK(fs::exists(target));
  CHECK_FALSE(fs::exists(file.temp_path()));
  CHECK(live_temp_file_count() == 0);
}

TEST_CASE("a write that throws before commit leaves the old file intact") {
  TempDir dir("roseinfer_test_atomic_throw");
  const fs::path target = dir.path / "out.jsonl";
  write_file_atomically(target, "old content\n");
  try {
    AtomicFile file(target);
    file.write("half of the new ");
    throw std::runtime_error("simulated failure mid-write");
  } catch (const std::runtime_error&) {
  }
  CHECK(slurp(target) == "old content\n");
  CHECK(entries_in(dir.path) == 1);
  CHECK(live_temp_file_count() == 0);
}

TEST_CASE("errors name the path") {
  TempDir dir("roseinfer_test_atomic_errors");
  const fs::path in_missing_folder = dir.path / "no" / "such" / "out.json";
  try {
    write_file_atomically(in_missing_folder, "x");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find(in_missing_folder.string()) == 0);
    CHECK(std::string(e.what()).find("does not exist") != std::string::npos);
  }
  try {
    write_file_atomically(dir.path, "x");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == dir.path.string() + ": is a directory");
  }
  CHECK(entries_in(dir.path) == 0);
}

TEST_CASE("SIGTERM while a temporary is open removes it and keeps the old file") {
  TempDir dir("roseinfer_test_atomic_signal");
  const fs::path target = dir.path / "out.json";
  write_file_atomically(target, "old\n");
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    install_temp_file_cleanup();
    AtomicFile file(target);
    file.write("partial");
    char byte = 1;
    (void)!::write(ready[1], &byte, 1);
    for (;;) ::pause();  // killed here, mid-write
  }
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  CHECK(fs::exists(target.string() + ".tmp." + std::to_string(child)));
  ::kill(child, SIGTERM);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(slurp(target) == "old\n");
  CHECK(entries_in(dir.path) == 1);
}
