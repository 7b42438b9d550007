// The socket side shared by the native transports (cpp/http_transport.cc,
// cpp/grpc_transport.cc): a listening socket served by a few epoll I/O
// threads (started by Python, each running serve_io without the GIL),
// non-blocking connections in a registry by id, each with its unwritten
// output (written by whichever thread has it while the socket takes it,
// else by the connection's I/O thread on EPOLLOUT), reading paused while a
// connection's output backs up, and a graceful stop (no new connections, the calls handed on answered or the grace
// over, then every connection closed). The protocol is a subclass's: it is
// given each connection's input and says what its connections owe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tsb {

struct SocketConnection {
  virtual ~SocketConnection() = default;

  uint64_t id = 0;
  int fd = -1;
  int epoll_fd = -1;

  // Guards what follows, and the subclass's output state.
  std::mutex mutex;
  bool closed = false;
  std::string out;  // not yet written
  size_t out_at = 0;
  bool want_out = false;            // EPOLLOUT registered
  bool close_when_written = false;  // shut down writing once `out` is written
  bool peer_eof = false;            // not read any more (the client ended its side)
  bool paused = false;              // not read until its output shrinks
  size_t unanswered = 0;            // calls handed on, not answered yet
};

class SocketServer {
 public:
  // Takes `listen_fd` (a listening socket); `what` names the transport in errors.
  SocketServer(int listen_fd, int io_threads, const char* what);
  virtual ~SocketServer();
  SocketServer(const SocketServer&) = delete;
  SocketServer& operator=(const SocketServer&) = delete;

  int io_threads() const { return static_cast<int>(loops_.size()); }

  // The body of I/O thread `index`, until stop(). Call without the GIL.
  void serve_io(int index);

  // Stops accepting, waits up to `grace_s` for every call handed on to be
  // answered, then ends the I/O threads (the caller joins them). Returns
  // whether all were answered in time. Call without the GIL.
  bool stop(double grace_s);

  // After the I/O threads ended: closes the connections left.
  void close_all();

 protected:
  // A new connection's protocol state (fd and ids are filled in after).
  virtual std::shared_ptr<SocketConnection> make_connection() = 0;
  // Input read from `connection` (its I/O thread; no lock held).
  virtual void on_input(SocketConnection& connection, const char* data, size_t size) = 0;
  // The client ended its side: true keeps the connection (it still owes a
  // reply), false closes it. No lock held.
  virtual bool on_peer_eof(SocketConnection&) { return false; }
  // Under the connection's mutex: whether its output backs up (not read then).
  virtual bool backlogged(const SocketConnection& connection) const;
  // Under the connection's mutex: moves what the protocol has ready to
  // `out` and writes (the socket took the last of `out`, or a reply came).
  virtual void flush(SocketConnection& connection) { write_out(connection); }
  // Under the connection's mutex, as it closes: the cancellations of its
  // calls in flight (run once the locks are let go).
  virtual void abandon(SocketConnection&, std::vector<std::function<void()>>&) {}
  // After a connection closed with calls unanswered (no lock held).
  virtual void abandoned(uint64_t) {}
  // Under the connection's mutex, as stop() begins (before the listening
  // socket closes): tell the client no new calls are taken.
  virtual void draining(SocketConnection&) {}

  // Under the connection's mutex: writes `out` while the socket takes it.
  void write_out(SocketConnection& connection);
  // Under the connection's mutex: the events its I/O thread waits for.
  void watch(SocketConnection& connection, bool out);
  std::shared_ptr<SocketConnection> find(uint64_t id);
  void close_connection(SocketConnection& connection);
  // Under the connection's mutex: a call handed on, and its answer.
  void opened_call(SocketConnection& connection);
  void answered_call(SocketConnection& connection);

 private:
  struct Loop {
    int epoll_fd = -1;
    int wake_fd = -1;
  };
  static void close_loop(Loop* loop);
  void accept_all(Loop& loop);
  void on_ready(SocketConnection& connection, uint32_t events, std::vector<char>& buffer);

  int listen_fd_;
  std::vector<Loop> loops_;
  char wake_marker_ = 0;
  std::atomic<bool> stopping_{false};

  std::mutex mutex_;  // guards the members below
  std::condition_variable drained_;
  bool accepting_ = true;
  uint64_t last_id_ = 0;
  size_t unanswered_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<SocketConnection>> connections_;
};

}  // namespace tsb
