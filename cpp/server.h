// Server options, lifecycle, model index/metadata/config/statistics and
// metrics: thin RAII wrappers over the core's server handles. Every call
// that can block is made by module.cc with the GIL released.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "triton_api.h"

namespace tsb {

class InflightRequests;

// The core's server handle, shared by a Server and its requests. Every call
// that passes it to the core holds a Use; close() (Server::stop()) waits for
// the uses in progress and then hands the handle over to be stopped and
// deleted, so no call can reach a server being deleted: later uses raise
// UNAVAILABLE. In a child process of fork() every use raises UNAVAILABLE
// (see fork.h).
class ServerHandle {
 public:
  explicit ServerHandle(TRITONSERVER_Server* server) noexcept;
  ServerHandle(const ServerHandle&) = delete;
  ServerHandle& operator=(const ServerHandle&) = delete;

  // Keeps the handle open while it lives.
  class Use {
   public:
    explicit Use(ServerHandle& owner);  // throws UNAVAILABLE when closed
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    TRITONSERVER_Server* get() const noexcept { return server_; }

   private:
    ServerHandle& owner_;
    TRITONSERVER_Server* server_;
  };
  Use use() { return Use(*this); }

  // Refuses new uses, waits for those in progress, and returns the handle
  // (null when already closed). Never throws.
  TRITONSERVER_Server* close() noexcept;
  // The handle, or null once closed (an address for tritonfrontend).
  TRITONSERVER_Server* peek() noexcept;
  // Whether this handle belongs to the parent of this process (fork()).
  bool inherited() const noexcept;

 private:
  std::mutex mutex_;
  std::condition_variable idle_;
  TRITONSERVER_Server* server_;
  unsigned long uses_ = 0;
  const uint64_t fork_generation_;
};

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
