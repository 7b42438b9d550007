#include "socket_server.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace tsb {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// A connection is not read while this much of its output is unwritten (a
// client that sends without reading): its socket's buffers then hold it back.
constexpr size_t kMaxBacklogBytes = 4 * 1024 * 1024;

}  // namespace

SocketServer::SocketServer(int listen_fd, int io_threads, const char* what) : listen_fd_(listen_fd) {
  if (io_threads < 1) throw std::invalid_argument(std::string(what) + ": io_threads must be at least 1");
  for (int i = 0; i < io_threads; ++i) {
    Loop loop;
    loop.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    loop.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (loop.epoll_fd < 0 || loop.wake_fd < 0) {
      close_loop(&loop);
      for (Loop& made : loops_) close_loop(&made);
      throw std::runtime_error(std::string(what) + ": epoll_create1/eventfd failed");
    }
    epoll_event wake{};
    wake.events = EPOLLIN;
    wake.data.ptr = &wake_marker_;
    epoll_ctl(loop.epoll_fd, EPOLL_CTL_ADD, loop.wake_fd, &wake);
    epoll_event listen{};
    listen.events = EPOLLIN | EPOLLEXCLUSIVE;
    listen.data.ptr = nullptr;
    epoll_ctl(loop.epoll_fd, EPOLL_CTL_ADD, listen_fd_, &listen);
    loops_.push_back(loop);
  }
}

SocketServer::~SocketServer() {
  close_all();
  for (Loop& loop : loops_) close_loop(&loop);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void SocketServer::close_loop(Loop* loop) {
  if (loop->epoll_fd >= 0) ::close(loop->epoll_fd);
  if (loop->wake_fd >= 0) ::close(loop->wake_fd);
  loop->epoll_fd = loop->wake_fd = -1;
}

void SocketServer::serve_io(int index) {
  if (index < 0 || index >= io_threads()) throw std::out_of_range("no such I/O thread");
  Loop& loop = loops_[static_cast<size_t>(index)];
  std::vector<epoll_event> events(256);
  std::vector<char> buffer(kReadChunk);
  while (!stopping_.load(std::memory_order_acquire)) {
    const int ready = epoll_wait(loop.epoll_fd, events.data(), static_cast<int>(events.size()), 1000);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < ready; ++i) {
      void* tag = events[static_cast<size_t>(i)].data.ptr;
      if (tag == &wake_marker_) {
        uint64_t count;
        (void)!::read(loop.wake_fd, &count, sizeof count);
      } else if (tag == nullptr) {
        accept_all(loop);
      } else {
        on_ready(*static_cast<SocketConnection*>(tag), events[static_cast<size_t>(i)].events, buffer);
      }
    }
  }
}

bool SocketServer::stop(double grace_s) {
  std::vector<std::shared_ptr<SocketConnection>> open;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!accepting_) return true;
    accepting_ = false;
    for (const auto& [id, connection] : connections_) open.push_back(connection);
  }
  for (const std::shared_ptr<SocketConnection>& connection : open) {
    std::lock_guard<std::mutex> lock(connection->mutex);
    if (!connection->closed) draining(*connection);
  }
  bool drained;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    for (Loop& loop : loops_) epoll_ctl(loop.epoll_fd, EPOLL_CTL_DEL, listen_fd_, nullptr);
    ::close(listen_fd_);
    listen_fd_ = -1;
    drained = drained_.wait_for(lock, std::chrono::duration<double>(grace_s), [&] { return unanswered_ == 0; });
  }
  stopping_.store(true, std::memory_order_release);
  for (Loop& loop : loops_) {
    const uint64_t one = 1;
    (void)!::write(loop.wake_fd, &one, sizeof one);
  }
  return drained;
}

void SocketServer::close_all() {
  std::unordered_map<uint64_t, std::shared_ptr<SocketConnection>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(connections_);
  }
  for (auto& [id, connection] : left) {
    std::lock_guard<std::mutex> lock(connection->mutex);
    if (!connection->closed) {
      connection->closed = true;
      ::close(connection->fd);
    }
  }
}

bool SocketServer::backlogged(const SocketConnection& connection) const {
  return connection.out.size() - connection.out_at >= kMaxBacklogBytes;
}

void SocketServer::accept_all(Loop& loop) {
  while (true) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN (another thread took it), or an error for this one only
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::shared_ptr<SocketConnection> connection = make_connection();
    connection->fd = fd;
    connection->epoll_fd = loop.epoll_fd;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!accepting_) {
        ::close(fd);
        return;
      }
      connection->id = ++last_id_;
      connections_.emplace(connection->id, connection);
    }
    epoll_event event{};
    event.events = EPOLLIN | EPOLLRDHUP;
    event.data.ptr = connection.get();
    epoll_ctl(loop.epoll_fd, EPOLL_CTL_ADD, fd, &event);
  }
}

void SocketServer::on_ready(SocketConnection& connection, uint32_t events, std::vector<char>& buffer) {
  // Keeps it alive through close_connection() below.
  std::shared_ptr<SocketConnection> keep = find(connection.id);
  if (!keep) return;
  if (events & (EPOLLHUP | EPOLLERR)) {
    close_connection(connection);  // reset, or both sides shut down
    return;
  }
  {
    std::lock_guard<std::mutex> lock(connection.mutex);
    if (events & EPOLLOUT) flush(connection);
    if (backlogged(connection)) {
      connection.paused = true;
      watch(connection, connection.want_out);
      return;
    }
  }
  if (events & (EPOLLIN | EPOLLRDHUP)) {
    while (true) {
      const ssize_t n = ::recv(connection.fd, buffer.data(), buffer.size(), 0);
      if (n > 0) {
        on_input(connection, buffer.data(), static_cast<size_t>(n));
        if (static_cast<size_t>(n) < buffer.size()) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n == 0 && on_peer_eof(connection)) {
        std::lock_guard<std::mutex> lock(connection.mutex);
        connection.peer_eof = true;
        watch(connection, connection.want_out);
        return;
      }
      close_connection(connection);  // the peer closed, or the socket failed
      return;
    }
  }
}

void SocketServer::write_out(SocketConnection& connection) {
  if (connection.closed) return;
  while (connection.out_at < connection.out.size()) {
    const ssize_t n = ::send(connection.fd, connection.out.data() + connection.out_at,
                             connection.out.size() - connection.out_at, MSG_NOSIGNAL);
    if (n > 0) {
      connection.out_at += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!connection.want_out) watch(connection, true);
      return;
    }
    // The peer is gone: its I/O thread sees the hang-up and closes.
    ::shutdown(connection.fd, SHUT_RDWR);
    return;
  }
  connection.out.clear();
  connection.out_at = 0;
  if (connection.want_out) watch(connection, false);
  if (connection.paused && !backlogged(connection)) {
    connection.paused = false;
    watch(connection, false);
  }
  if (connection.close_when_written) ::shutdown(connection.fd, SHUT_WR);
}

void SocketServer::watch(SocketConnection& connection, bool out) {
  epoll_event event{};
  event.events = (connection.peer_eof || connection.paused ? 0u : EPOLLIN | EPOLLRDHUP) | (out ? EPOLLOUT : 0u);
  event.data.ptr = &connection;
  epoll_ctl(connection.epoll_fd, EPOLL_CTL_MOD, connection.fd, &event);
  connection.want_out = out;
}

std::shared_ptr<SocketConnection> SocketServer::find(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = connections_.find(id);
  return it == connections_.end() ? nullptr : it->second;
}

void SocketServer::opened_call(SocketConnection& connection) {
  ++connection.unanswered;
  std::lock_guard<std::mutex> all(mutex_);
  ++unanswered_;
}

void SocketServer::answered_call(SocketConnection& connection) {
  --connection.unanswered;
  std::lock_guard<std::mutex> all(mutex_);
  if (--unanswered_ == 0) drained_.notify_all();
}

void SocketServer::close_connection(SocketConnection& connection) {
  size_t unanswered;
  std::vector<std::function<void()>> cancels;  // run once the locks are let go
  {
    std::lock_guard<std::mutex> lock(connection.mutex);
    if (connection.closed) return;
    connection.closed = true;
    epoll_ctl(connection.epoll_fd, EPOLL_CTL_DEL, connection.fd, nullptr);
    ::close(connection.fd);
    unanswered = connection.unanswered;
    abandon(connection, cancels);
    connection.unanswered = 0;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connections_.erase(connection.id);
    unanswered_ -= unanswered;
    if (unanswered != 0 && unanswered_ == 0) drained_.notify_all();
  }
  for (const std::function<void()>& cancel : cancels) cancel();
  if (unanswered != 0) abandoned(connection.id);
}

}  // namespace tsb
