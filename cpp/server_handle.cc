#include "server_handle.h"

#include "errors.h"
#include "fork.h"

namespace tsb {

ServerHandle::ServerHandle(TRITONSERVER_Server* server) noexcept
    : server_(server), fork_generation_(fork_generation()) {}

bool ServerHandle::inherited() const noexcept {
  return inherited_from_parent(fork_generation_);
}

ServerHandle::Use::Use(ServerHandle& owner) : owner_(owner) {
  // Checked before the lock: in a child, a thread of the parent may have
  // held it.
  if (owner.inherited()) raise(TRITONSERVER_ERROR_UNAVAILABLE, kForkedMessage);
  std::lock_guard<std::mutex> lock(owner.mutex_);
  if (owner.server_ == nullptr) {
    raise(TRITONSERVER_ERROR_UNAVAILABLE, "the server is stopped");
  }
  server_ = owner.server_;
  ++owner.uses_;
}

ServerHandle::Use::~Use() {
  std::lock_guard<std::mutex> lock(owner_.mutex_);
  if (--owner_.uses_ == 0) owner_.idle_.notify_all();
}

TRITONSERVER_Server* ServerHandle::close() noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  TRITONSERVER_Server* server = server_;
  server_ = nullptr;
  idle_.wait(lock, [this] { return uses_ == 0; });
  return server;
}

TRITONSERVER_Server* ServerHandle::peek() noexcept {
  if (inherited()) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  return server_;
}

}  // namespace tsb
