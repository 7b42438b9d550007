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

#include "server_handle.h"
#include "triton_api.h"

namespace tsb {

// fork() hook (fork_hooks.cc): a child starts with no background stops
// (its parent's stop threads are not there, and their list's lock may have
// been held by one of them).
void server_after_fork_in_child() noexcept;

class InflightRequests;

class ServerOptions {
 public:
  ServerOptions();
  ~ServerOptions();
  ServerOptions(const ServerOptions&) = delete;
  ServerOptions& operator=(const ServerOptions&) = delete;
  TRITONSERVER_ServerOptions* get() const noexcept { return options_; }

  // The time Server::stop() waits for work in flight. The core itself is
  // given kStopGrace seconds more, so that its own stop can finish the job
  // after stop() has given up (see Server::stop()).
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
  // Stops the server: discards the requests not submitted, ServerStop, then
  // ServerDelete once it succeeded. Waits at most the exit timeout; past it,
  // raises INTERNAL ("Exit timeout expired") and lets the core's stop run on
  // in the background. UNAVAILABLE when already stopped; nothing in a child
  // process of fork() (the server is its parent's). The destructor stops a
  // running server the same way, without raising, and without the GIL when
  // called with it.
  void stop();
  // The same from Python (call with the GIL): stops without the GIL, then
  // drops the references the discarded requests parked.
  void stop_from_python();
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
  // Drains the model's requests first (InflightRequests::drain(), at most
  // the exit timeout), then unloads it.
  void unload_model(const std::string& name, bool unload_dependents);
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
  // Requests submitted to this server and not yet finished.
  const std::shared_ptr<InflightRequests>& inflight() const { return inflight_; }

 private:
  // Runs the stop of `server` (closed) and waits for it: false when the
  // exit timeout expired (it goes on in the background), else its error,
  // if any, is left in `code` / `message`.
  bool stop_closed(TRITONSERVER_Server* server, bool& failed,
                   TRITONSERVER_Error_Code& code, std::string& message);

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
