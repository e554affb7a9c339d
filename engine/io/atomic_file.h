#pragma once
// Output files (completions, results) are written to FILE.tmp.<pid> in the same folder, fsynced and
// renamed over FILE, so a reader sees the old file or the whole new one, never half of one. Open
// temp paths are kept in a registry that a SIGINT/SIGTERM handler can clean up, so Ctrl-C leaves
// nothing.
#include <filesystem>
#include <string>
#include <string_view>

namespace rose {

class AtomicFile {
 public:
  // Creates PATH.tmp.<pid>. Throws rose::Error naming the path when the folder is missing or the
  // file cannot be created.
  explicit AtomicFile(std::filesystem::path path);
  // Without commit(): removes the temporary file and leaves the target as it was.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view data);
  // Flushes, fsyncs, closes and renames over the target (then fsyncs the folder).
  void commit();

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temp_path() const { return temp_path_; }

 private:
  void abandon() noexcept;

  std::filesystem::path path_;
  std::filesystem::path temp_path_;
  int fd_ = -1;
  int registry_slot_ = -1;
  bool committed_ = false;
};

// Writes a whole file atomically.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

// Installs SIGINT and SIGTERM handlers that unlink every live temporary file, then die of the same
// signal (so the exit status still says "interrupted"). Idempotent.
void install_temp_file_cleanup();

// While on, the first SIGINT or SIGTERM is only recorded (pending_interrupt() returns its number),
// so a long run can stop between steps and keep its work; a second signal acts at once.
void defer_interrupts(bool on);
int pending_interrupt();  // 0 when none
// Removes every live temporary file and dies of `signal_number`, as the handler does.
[[noreturn]] void die_of_signal(int signal_number);

// Temporary files currently open (for tests).
int live_temp_file_count();

}  // namespace rose
