// Server options, lifecycle, model index/metadata/config/statistics and
// metrics: thin RAII wrappers over the core's server handles. Every call
// that can block is made with the GIL released (module.cc's call guards, or
// the *_from_python variants here).
#pragma once

#include <nanobind/nanobind.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "model_unload.h"
#include "server_handle.h"
#include "triton_api.h"

namespace tsb {

// fork() hook (fork_hooks.cc): a child starts with no background stops
// (its parent's stop threads are not there, and their list's lock may have
// been held by one of them).
void server_after_fork_in_child() noexcept;

class InflightRequests;
struct BackgroundStop;

class ServerOptions {
 public:
  ServerOptions();
  ~ServerOptions();
  ServerOptions(const ServerOptions&) = delete;
  ServerOptions& operator=(const ServerOptions&) = delete;
  TRITONSERVER_ServerOptions* get() const noexcept { return options_; }

  // The time Server.stop() waits for work in flight. The core itself is
  // given kStopGrace seconds more, so that its own stop can finish the job
  // after stop() has given up (see BackgroundStop, server.cc).
  void set_exit_timeout(unsigned int seconds);
  unsigned int exit_timeout() const noexcept { return exit_timeout_s_; }
  static constexpr unsigned int kStopGrace = 30;

  // Applies a core setter, naming the option in any error.
  template <typename... Args, typename... Values>
  void apply(TRITONSERVER_Error* (*setter)(TRITONSERVER_ServerOptions*,
                                           Args...),
             const char* field, Values... values);

 private:
  TRITONSERVER_ServerOptions* options_ = nullptr;
  unsigned int exit_timeout_s_ = 30;  // the core's default
};

// A model load/registration parameter: string, int, bool or bytes.
struct LoadParameter {
  std::string name;
  std::variant<std::string, int64_t, bool, std::vector<uint8_t>> value;
};

// A stop begun by Server::begin_stop(): the core's stop runs on a thread of
// its own (BackgroundStop, server.cc) while the caller waits for it in
// slices (from Python a Ctrl-C is delivered between them) and can say what
// it waits for. A stop not waited for to its end goes on in the background;
// reap_stopped() waits for it at interpreter exit. Move-only: its
// destruction leaves a stop still running to reap_stopped() too. In a child
// of fork() it is done and does nothing: the stop's thread is the parent's
// (see fork.h).
class StopInProgress {
 public:
  // A null `stop`: nothing to stop (a child of fork()), done at once.
  StopInProgress(std::shared_ptr<BackgroundStop> stop,
                 unsigned int exit_timeout_s) noexcept;
  ~StopInProgress() { leave_running(); }
  StopInProgress(StopInProgress&&) noexcept = default;
  StopInProgress& operator=(StopInProgress&&) = delete;
  StopInProgress(const StopInProgress&) = delete;
  StopInProgress& operator=(const StopInProgress&) = delete;
  // Waits at most `timeout_s`; true once the stop is done. Call without the
  // GIL.
  bool wait(double timeout_s);
  // The requests in flight the stop waits for, counted per model.
  std::vector<std::pair<std::string, size_t>> inflight() const;
  // Done: raises the core's error if its stop failed. Not done (the caller
  // waited out the exit timeout): leave_running(), then raises INTERNAL
  // ("Exit timeout expired").
  void finish();
  // The same from Python (call with the GIL): first drops the references
  // the requests that ended meanwhile parked.
  void finish_from_python();
  // The caller stops waiting: the stop goes on in the background, for
  // reap_stopped(). Never throws.
  void leave_running() noexcept;

 private:
  // The stop, or null when there is none to wait for in this process.
  BackgroundStop* ours() const noexcept;

  std::shared_ptr<BackgroundStop> stop_;
  unsigned int exit_timeout_s_;
  uint64_t fork_generation_;
};

class Server {
 public:
  explicit Server(ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The core's handle, shared with requests.
  const std::shared_ptr<ServerHandle>& handle() const noexcept {
    return handle_;
  }
  // Begins stopping the server: waits for the calls into the core in
  // progress, discards the requests not submitted, and starts the core's
  // stop (ServerStop, then ServerDelete once it succeeded; see
  // BackgroundStop), which the caller waits for (at most the exit timeout,
  // then StopInProgress::finish()). UNAVAILABLE when already stopped;
  // nothing to stop in a child process of fork() (the server is its
  // parent's). The destructor stops a running server the same way, waiting
  // at most the exit timeout, without raising, and without the GIL when
  // called with it.
  StopInProgress begin_stop();
  // The same from Python (call with the GIL): begins without the GIL, then
  // drops the references the discarded requests parked.
  StopInProgress begin_stop_from_python();
  bool is_live();
  bool is_ready();
  std::string metadata();
  std::string model_index(uint32_t flags);
  bool model_is_ready(const std::string& name, int64_t version);
  uint32_t model_batch_properties(const std::string& name, int64_t version);
  uint32_t model_transaction_properties(const std::string& name,
                                        int64_t version);
  std::string model_metadata(const std::string& name, int64_t version);
  std::string model_statistics(const std::string& name, int64_t version);
  std::string model_config(const std::string& name, int64_t version,
                           uint32_t config_version);
  void load_model(const std::string& name,
                  const std::vector<LoadParameter>& parameters);
  // The same from Python (call with the GIL): `parameters` maps names to
  // str, int, bool or bytes (INVALID_ARG for any other value); the load
  // runs without the GIL.
  void load_model_from_python(const std::string& name,
                              nanobind::dict parameters);
  // Begins the model's unload (model_unload.h): drained at once (it reads
  // as being unloaded, new requests refused), its requests in flight then
  // waited for (at most the exit timeout) and the core's unload called, on
  // a thread of its own. UNAVAILABLE, nothing begun, when stopped.
  UnloadInProgress begin_unload(const std::string& name,
                                bool unload_dependents);
  // The same from Python (call with the GIL): begins without the GIL, then
  // drops the references the discarded requests parked.
  UnloadInProgress begin_unload_from_python(const std::string& name,
                                            bool unload_dependents);
  // begin_unload() waited for to its end; raises the core's error.
  void unload_model(const std::string& name, bool unload_dependents);
  // The models being drained by an unload (each named once): they read as
  // being unloaded until the core's unload is asked for.
  std::vector<std::string> draining_models();
  void register_model_repository(
      const std::string& path,
      const std::vector<std::pair<std::string, std::string>>& mapping);
  void unregister_model_repository(const std::string& path);
  void poll_model_repository();
  std::string metrics(int format);
  // Waits (at most `timeout_s` in all) for the background stops left by
  // stop() calls that hit the exit timeout; returns how many of them did not
  // end with their server deleted (still running, or the core gave up).
  // Called at interpreter exit, so that no thread of ours is inside the core
  // while the process tears down.
  static size_t reap_stopped(double timeout_s);
  // The requests in flight that those background stops wait for, counted
  // per model (what interpreter exit waits for, as it tells the user).
  static std::vector<std::pair<std::string, size_t>> background_inflight();
  // Requests submitted to this server and not yet finished.
  const std::shared_ptr<InflightRequests>& inflight() const { return inflight_; }

 private:
  // Starts the stop of `server` (closed) on a thread of its own.
  StopInProgress start_stop(TRITONSERVER_Server* server);

  ServerHandle::Use use() const { return handle_->use(); }

  std::shared_ptr<ServerHandle> handle_;
  std::shared_ptr<InflightRequests> inflight_;
  unsigned int exit_timeout_s_;
};

}  // namespace tsb

#include "errors.h"
#include "triton_library.h"

template <typename... Args, typename... Values>
void tsb::ServerOptions::apply(
    TRITONSERVER_Error* (*setter)(TRITONSERVER_ServerOptions*, Args...),
    const char* field, Values... values) {
  std::string context = std::string("Options.") + field;
  check(setter(options_, static_cast<Args>(values)...), context.c_str());
}
