#include "engine/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "engine/common/error.h"

namespace rose {
namespace {

// The registry lives in static storage and is read by a signal handler, so it is a fixed array of
// plain char buffers guarded by atomic states: the handler only reads slots marked live and calls
// unlink(), which is async-signal-safe.
constexpr int kSlots = 64;
constexpr size_t kMaxPath = 4096;
enum SlotState : int { kFree = 0, kFilling = 1, kLive = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  char path[kMaxPath];
};
std::array<Slot, kSlots> g_slots;
std::atomic<bool> g_handlers_installed{false};
std::atomic<bool> g_defer_interrupts{false};
std::atomic<int> g_pending_interrupt{0};
static_assert(std::atomic<int>::is_always_lock_free, "read and written by a signal handler");

int register_temp(const std::string& path) {
  if (path.size() + 1 > kMaxPath) return -1;  // too long to track; the file is still written safely
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (g_slots[i].state.compare_exchange_strong(expected, kFilling)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].state.store(kLive);
      return i;
    }
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot >= 0) g_slots[slot].state.store(kFree);
}

extern "C" void remove_temps_and_die(int signal_number) {
  if (g_defer_interrupts.load() && g_pending_interrupt.load() == 0) {
    g_pending_interrupt.store(signal_number);
    return;
  }
  for (auto& slot : g_slots) {
    if (slot.state.load() == kLive) ::unlink(slot.path);
  }
  // Die of the same signal so the parent sees an interrupted process, not a normal exit.
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal_number, &action, nullptr);
  raise(signal_number);
}

[[noreturn]] void io_fail(const std::string& what, const std::filesystem::path& path, int err) {
  fail("{}: {}: {}", path.string(), what, std::strerror(err));
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path path) : path_(std::move(path)) {
  std::error_code ec;
  if (std::filesystem::is_directory(path_, ec)) fail("{}: is a directory", path_.string());
  std::filesystem::path folder = path_.parent_path();
  if (!folder.empty() && !std::filesystem::is_directory(folder, ec)) {
    fail("{}: cannot write: folder '{}' does not exist", path_.string(), folder.string());
  }
  temp_path_ = path_;
  temp_path_ += ".tmp." + std::to_string(::getpid());
  // Registered before the file exists, so there is no moment when a signal would miss it.
  registry_slot_ = register_temp(temp_path_.string());
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int err = errno;
    unregister_temp(registry_slot_);
    io_fail("cannot create " + temp_path_.filename().string(), path_, err);
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_) abandon();
}

void AtomicFile::abandon() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_path_.c_str());
  unregister_temp(registry_slot_);
  registry_slot_ = -1;
}

void AtomicFile::write(std::string_view data) {
  ROSE_ASSERT(fd_ >= 0 && !committed_);
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      abandon();
      io_fail("write failed", path_, err);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void AtomicFile::commit() {
  ROSE_ASSERT(fd_ >= 0 && !committed_);
  if (::fsync(fd_) != 0) {
    const int err = errno;
    abandon();
    io_fail("fsync failed", path_, err);
  }
  const int close_result = ::close(fd_);
  fd_ = -1;
  if (close_result != 0) {
    const int err = errno;
    abandon();
    io_fail("close failed", path_, err);
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    abandon();
    io_fail("rename failed", path_, err);
  }
  committed_ = true;
  unregister_temp(registry_slot_);
  registry_slot_ = -1;
  // Make the rename itself durable; failure here does not undo a completed write, so it is ignored.
  std::filesystem::path folder = path_.parent_path();
  if (folder.empty()) folder = ".";
  const int dir_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  AtomicFile file(path);
  file.write(content);
  file.commit();
}

void install_temp_file_cleanup() {
  if (g_handlers_installed.exchange(true)) return;
  struct sigaction action {};
  action.sa_handler = remove_temps_and_die;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

void defer_interrupts(bool on) { g_defer_interrupts.store(on); }

int pending_interrupt() { return g_pending_interrupt.load(); }

void die_of_signal(int signal_number) {
  g_defer_interrupts.store(false);
  remove_temps_and_die(signal_number);
  std::_Exit(128 + signal_number);  // not reached: the signal's default action ends the process
}

int live_temp_file_count() {
  int count = 0;
  for (auto& slot : g_slots) count += slot.state.load() == kLive;
  return count;
}

}  // namespace rose
