// The gate around the core's server handle, below both Server and Request.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "triton_api.h"

namespace tsb {

// The core's server handle, shared by a Server and its requests. Every call
// that passes it to the core holds a Use; close() (Server::begin_stop()) waits for
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

}  // namespace tsb
