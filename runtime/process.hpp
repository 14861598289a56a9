#pragma once
/// runtime/process.hpp: process-level plumbing: signals, the exit latch, host facts.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "messages/enums.hpp"

namespace caf_agent::runtime {

/// Set once by whoever decides the process should end (a signal, a lost
/// coordinator, a finished job); the main thread waits on it.
class exit_latch {
 public:
  /// Records the first trigger only; later ones are ignored.
  void trigger(int exit_code, std::string reason);
  /// A trigger by the job itself once it ended on its own (finished() is true after it, if
  /// it was the first): what the job runners tell apart from a signal or a lost peer,
  /// whose reason is free text.
  void finish(int exit_code, std::string reason);
  /// Waits until triggered or `timeout` passes; returns whether it was triggered.
  bool wait_for(std::chrono::milliseconds timeout);
  /// Waits until triggered.
  void wait();
  int exit_code() const;
  std::string reason() const;
  bool triggered() const;
  /// Whether the first trigger was finish(): the job ended on its own.
  bool finished() const;

 private:
  void set(int exit_code, std::string reason, bool finished);
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<int> code_;
  std::string reason_;
  bool finished_ = false;
};

/// Blocks SIGINT and SIGTERM in the calling thread (call first in main, so every
/// thread started later inherits the mask) and starts a thread that turns them
/// into `latch.trigger(0, "SIGTERM")`. A second signal exits at once with 130.
void install_signal_latch(exit_latch& latch);

/// Bounds what is left of a process's exit once its work is done. CAF 0.17's actor_system
/// destructor can wait forever for a detached actor's thread after the actor has ended (its
/// state destroyed, its down message sent): the thread keeps a reference to its own actor
/// (actor-framework issue #1196, fixed in 0.18 by pull request #1202; Debian ships 0.17.6).
/// Declare one right after the actor_system (as run_in_actor_system in runtime/caf_setup.hpp
/// does), so that its destructor runs just before the system's: it starts a thread that ends the process with the code
/// given to exit_with() if the process is still running `grace` later, and says so in the log.
class exit_deadline {
 public:
  explicit exit_deadline(std::chrono::milliseconds grace) : grace_(grace) {}
  exit_deadline(const exit_deadline&) = delete;
  exit_deadline& operator=(const exit_deadline&) = delete;
  ~exit_deadline();
  /// Records the code the process ends with (also when the deadline ends it); returns it.
  int exit_with(int code) {
    code_ = code;
    return code;
  }

 private:
  std::chrono::milliseconds grace_;
  int code_ = 1;  // a run function that never reached exit_with failed
};

/// The grace a node's exit_deadline gives. Rationale: a node's actor system ends in well under
/// a second once its work is done; 15.8 s was seen on a loaded 2-core machine whose page cache
/// had been reclaimed (the binary and LibTorch paged back in). 30 s leaves room for that and
/// still ends a stuck exit.
inline constexpr std::chrono::milliseconds node_exit_grace{30000};

/// This host's name.
std::string host_name();

/// Number of NVIDIA GPU device nodes (/dev/nvidiaN) visible to this process.
int count_gpus();

/// The GPUs' model names the NVIDIA driver lists (/proc/driver/nvidia/gpus/*/information,
/// "Model:" lines), joined by ", "; empty without the driver.
std::string gpu_names();

/// "role@host:pid", unique per process; "role@host:pid#N" once the process rejoined
/// the cluster for the N-th time (each incarnation is a new node to the coordinator, so
/// a late loss notice of the last one never touches the new one).
std::string make_node_id(messages::node_role role);

/// Sets N of make_node_id (0: the first incarnation).
void set_node_incarnation(int n);

}  // namespace caf_agent::runtime
