#include "http_transport.h"

#include <errno.h>
#include <llhttp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nanobind/stl/string.h>

#include "kserve_infer.h"
#include "server.h"
#include "thread_state.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace tsb {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// A connection is not read while this many of its replies are pending or
// this much of its output is unwritten (a client that pipelines without
// reading): its socket's buffers then hold it back.
constexpr size_t kMaxPending = 64;
// A keep-alive connection idle this long between requests is closed (as
// uvicorn's default timeout_keep_alive); swept about once a second.
constexpr auto kKeepAliveIdle = std::chrono::seconds(5);
constexpr size_t kMaxBacklogBytes = 4 * 1024 * 1024;
constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";

class HttpTransport;

// One reply of a connection, in request order: its bytes not yet moved to
// the socket's output, whether it is whole, and whether the connection
// closes after it.
struct Outgoing {
  std::string bytes;
  bool done = false;
  bool close = false;
  bool head = false;  // the answer to HEAD: no body
  std::function<void()> cancel;  // a native infer request's, until answered
};

struct Connection {
  uint64_t id = 0;
  int fd = -1;
  int epoll_fd = -1;
  HttpTransport* transport = nullptr;

  // The I/O thread's own (parsing).
  llhttp_t parser;
  std::string url, field, value;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool in_message = false;      // a request begun, not yet whole
  bool refused = false;         // this request was handed to `refused`
  bool reading_stopped = false; // input after a closing request is dropped

  // Under `mutex`: the ordered output, and the socket's writes.
  std::mutex mutex;
  bool closed = false;
  uint64_t next_seq = 0;  // the next request's (or interim answer's) number
  uint64_t send_seq = 0;  // the reply being written
  std::map<uint64_t, Outgoing> pending;
  std::string out;  // moved from replies, not yet written
  size_t out_at = 0;
  bool want_out = false;        // EPOLLOUT registered
  bool close_when_written = false;
  bool peer_eof = false;        // the client ended its side, waiting for a refusal's reply
  bool paused = false;          // not read until its backlog shrinks

  bool backlogged() const {
    return pending.size() >= kMaxPending || out.size() - out_at >= kMaxBacklogBytes;
  }
  size_t unanswered = 0;        // requests handed on, reply not whole yet
  std::chrono::steady_clock::time_point last_active = std::chrono::steady_clock::now();
};

// The reason phrase of a status line (clients read only the code; llhttp's
// own table aborts on a code it does not know).
const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return status < 400 ? "OK" : "Error";
  }
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return text;
}

class HttpTransport {
 public:
  HttpTransport(int listen_fd, int io_threads, size_t max_body, nb::object dispatch,
                nb::object refused, nb::object closed)
      : listen_fd_(listen_fd), max_body_(max_body), dispatch_(std::move(dispatch)),
        refused_(std::move(refused)), closed_(std::move(closed)) {
    if (io_threads < 1) throw nb::value_error("io_threads must be at least 1");
    llhttp_settings_init(&settings_);
    settings_.on_message_begin = &HttpTransport::on_message_begin;
    settings_.on_url = &HttpTransport::on_url;
    settings_.on_header_field = &HttpTransport::on_header_field;
    settings_.on_header_value = &HttpTransport::on_header_value;
    settings_.on_header_value_complete = &HttpTransport::on_header_value_complete;
    settings_.on_headers_complete = &HttpTransport::on_headers_complete;
    settings_.on_body = &HttpTransport::on_body;
    settings_.on_message_complete = &HttpTransport::on_message_complete;
    for (int i = 0; i < io_threads; ++i) {
      Loop loop;
      loop.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
      loop.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (loop.epoll_fd < 0 || loop.wake_fd < 0) {
        close_loops(&loop);
        throw nb::builtin_exception(nb::exception_type::runtime_error,
                                    "HttpTransport: epoll_create1/eventfd failed");
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

  ~HttpTransport() {
    {
      std::lock_guard<std::mutex> lock(alive_->mutex);
      alive_->transport = nullptr;  // late infer replies go nowhere
    }
    close_all();
    for (Loop& loop : loops_) close_loops(&loop);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }

  int io_threads() const { return static_cast<int>(loops_.size()); }

  // The body of I/O thread `index` (a Python thread), until stop().
  void serve_io(int index) {
    if (index < 0 || index >= io_threads()) throw nb::index_error("no such I/O thread");
    GilRelease release;
    Loop& loop = loops_[static_cast<size_t>(index)];
    std::vector<epoll_event> events(256);
    std::vector<char> buffer(kReadChunk);
    while (!stopping_.load(std::memory_order_acquire)) {
      const int ready = epoll_wait(loop.epoll_fd, events.data(), static_cast<int>(events.size()), 1000);
      close_idle(loop);
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
          on_ready(*static_cast<Connection*>(tag), events[static_cast<size_t>(i)].events, buffer);
        }
      }
    }
  }

  void reply(uint64_t connection, uint64_t seq, int status, nb::handle headers, nb::bytes body) {
    std::string head = response_head(status, headers);
    const char* data = body.c_str();
    const size_t size = body.size();
    GilRelease release;
    write_reply(connection, seq, head, data, size);
  }

  // The native infer route's replies (kserve_infer_reply): its body as the
  // routes' _infer_reply sends it.
  void write_infer_reply(uint64_t connection, uint64_t seq, int status, const std::string& body,
                         int64_t header_length) {
    std::string head = "HTTP/1.1 ";
    head += std::to_string(status);
    head += ' ';
    head += reason_phrase(status);
    if (header_length < 0) {
      head += "\r\ncontent-type: application/json\r\n";
    } else {
      head += "\r\ncontent-type: application/octet-stream\r\ninference-header-content-length: ";
      head += std::to_string(header_length);
      head += "\r\n";
    }
    write_reply(connection, seq, head, body.data(), body.size());
  }

  // Serves the plain binary-tensor infer request natively from now on
  // (`server`: the native Server; `json_loads`: json.loads).
  void enable_infer(nb::object server, nb::object json_loads) {
    infer_server_ = nb::cast<Server*>(server);
    infer_server_object_ = std::move(server);
    json_loads_ = std::move(json_loads);
  }

  // Without the GIL.
  void write_reply(uint64_t connection, uint64_t seq, const std::string& head, const char* data,
                   size_t size) {
    append(connection, seq, [&](Outgoing& entry) {
      entry.bytes.reserve(head.size() + size + 64);
      entry.bytes += head;
      entry.bytes += "content-length: ";
      entry.bytes += std::to_string(size);
      entry.bytes += entry.close ? "\r\nconnection: close\r\n\r\n" : "\r\n\r\n";
      if (!entry.head) entry.bytes.append(data, size);
      entry.done = true;
    });
  }

  void reply_start(uint64_t connection, uint64_t seq, int status, nb::handle headers) {
    std::string head = response_head(status, headers);
    GilRelease release;
    append(connection, seq, [&](Outgoing& entry) {
      entry.bytes += head;
      entry.bytes += entry.close ? "transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
                                 : "transfer-encoding: chunked\r\n\r\n";
    });
  }

  void reply_chunk(uint64_t connection, uint64_t seq, nb::bytes chunk) {
    if (chunk.size() == 0) return;  // an empty chunk would end the body
    const char* data = chunk.c_str();
    const size_t size = chunk.size();
    GilRelease release;
    append(connection, seq, [&](Outgoing& entry) {
      if (entry.head) return;
      char length[32];
      const int n = std::snprintf(length, sizeof length, "%zx\r\n", size);
      entry.bytes.append(length, static_cast<size_t>(n));
      entry.bytes.append(data, size);
      entry.bytes += "\r\n";
    });
  }

  void reply_end(uint64_t connection, uint64_t seq) {
    GilRelease release;
    append(connection, seq, [&](Outgoing& entry) {
      if (!entry.head) entry.bytes += "0\r\n\r\n";
      entry.done = true;
    });
  }

  // Stops accepting, waits up to `grace_s` for every request handed on to
  // be answered, then ends the I/O threads (the caller joins them) and
  // closes every connection. Returns whether all were answered in time.
  bool stop(double grace_s) {
    GilRelease release;
    bool drained;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!accepting_) return true;
      accepting_ = false;
      for (Loop& loop : loops_) epoll_ctl(loop.epoll_fd, EPOLL_CTL_DEL, listen_fd_, nullptr);
      ::close(listen_fd_);
      listen_fd_ = -1;
      drained = drained_.wait_for(lock, std::chrono::duration<double>(grace_s),
                                  [&] { return unanswered_ == 0; });
    }
    stopping_.store(true, std::memory_order_release);
    for (Loop& loop : loops_) {
      const uint64_t one = 1;
      (void)!::write(loop.wake_fd, &one, sizeof one);
    }
    return drained;
  }

  // After the I/O threads ended: closes the connections left.
  void close_all() {
    std::unordered_map<uint64_t, std::shared_ptr<Connection>> left;
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

 private:
  struct Loop {
    int epoll_fd = -1;
    int wake_fd = -1;
    std::chrono::steady_clock::time_point last_sweep;
  };

  static void close_loops(Loop* loop) {
    if (loop->epoll_fd >= 0) ::close(loop->epoll_fd);
    if (loop->wake_fd >= 0) ::close(loop->wake_fd);
    loop->epoll_fd = loop->wake_fd = -1;
  }

  static std::string response_head(int status, nb::handle headers) {
    std::string head = "HTTP/1.1 ";
    head += std::to_string(status);
    head += ' ';
    head += reason_phrase(status);
    head += "\r\n";
    for (auto [name, value] : nb::borrow<nb::dict>(headers)) {
      head += nb::cast<std::string>(name);
      head += ": ";
      head += nb::cast<std::string>(value);
      head += "\r\n";
    }
    return head;
  }

  // Closes the connections of `loop` idle past kKeepAliveIdle: between
  // requests, nothing unanswered or unwritten.
  void close_idle(Loop& loop) {
    const auto now = std::chrono::steady_clock::now();
    if (now - loop.last_sweep < std::chrono::seconds(1)) return;
    loop.last_sweep = now;
    std::vector<std::shared_ptr<Connection>> mine;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [id, connection] : connections_) {
        if (connection->epoll_fd == loop.epoll_fd) mine.push_back(connection);
      }
    }
    for (const std::shared_ptr<Connection>& connection : mine) {
      bool idle;
      {
        std::lock_guard<std::mutex> lock(connection->mutex);
        idle = !connection->in_message && connection->unanswered == 0 && connection->out.empty() &&
               now - connection->last_active > kKeepAliveIdle;
      }
      if (idle) close_connection(*connection);
    }
  }

  void accept_all(Loop& loop) {
    while (true) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN (another thread took it), or an error for this one only
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto connection = std::make_shared<Connection>();
      connection->fd = fd;
      connection->epoll_fd = loop.epoll_fd;
      connection->transport = this;
      llhttp_init(&connection->parser, HTTP_REQUEST, &settings_);
      connection->parser.data = connection.get();
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

  void on_ready(Connection& connection, uint32_t events, std::vector<char>& buffer) {
    // Keeps it alive through close_connection() below.
    std::shared_ptr<Connection> keep = find(connection.id);
    if (!keep) return;
    if (events & (EPOLLHUP | EPOLLERR)) {
      close_connection(connection);  // reset, or both sides shut down
      return;
    }
    {
      std::lock_guard<std::mutex> lock(connection.mutex);
      if (events & EPOLLOUT) write_out(connection);
      if (connection.backlogged()) {
        connection.paused = true;
        watch(connection, connection.want_out);
        return;
      }
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      while (true) {
        const ssize_t n = ::recv(connection.fd, buffer.data(), buffer.size(), 0);
        if (n > 0) {
          {
            std::lock_guard<std::mutex> lock(connection.mutex);
            connection.last_active = std::chrono::steady_clock::now();
          }
          if (!connection.reading_stopped) parse(connection, buffer.data(), static_cast<size_t>(n));
          if (static_cast<size_t>(n) < buffer.size()) break;
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n == 0 && wait_for_refusal(connection)) return;
        close_connection(connection);  // the peer closed, or the socket failed
        return;
      }
    }
  }

  // A client that ends its side after a request the transport refused
  // (e.g. `curl` after a body too large) still gets the refusal: reading
  // stops, and the hang-up after the reply's shutdown closes. Any other
  // end of input is a client that left (its requests are cancelled).
  bool wait_for_refusal(Connection& connection) {
    std::lock_guard<std::mutex> lock(connection.mutex);
    if (!connection.refused || connection.unanswered == 0) return false;
    connection.peer_eof = true;
    watch(connection, connection.want_out);
    return true;
  }

  void parse(Connection& connection, const char* data, size_t size) {
    const llhttp_errno_t error = llhttp_execute(&connection.parser, data, size);
    if (error == HPE_OK || connection.reading_stopped) return;
    connection.reading_stopped = true;
    if (connection.refused) return;  // a callback refused it, and said why
    const char* reason = llhttp_get_error_reason(&connection.parser);
    hand_refused(connection, -1, std::string("malformed HTTP request: ") +
                                     (reason != nullptr ? reason : llhttp_errno_name(error)));
  }

  // A request handed to `refused` (too large or malformed): answered
  // there, the connection closes after it.
  void hand_refused(Connection& connection, int64_t size, std::string reason) {
    connection.refused = true;
    connection.reading_stopped = true;
    const uint64_t seq = open_entry(connection, /*close=*/true);
    bool handed = false;
    {
      GilAcquire gil;
      try {
        refused_(connection.id, seq, size, reason);
        handed = true;
      } catch (nb::python_error& error) {
        error.discard_as_unraisable(refused_);
      }
    }
    if (!handed) internal_error(connection.id, seq);
  }

  // The answer to a request Python could not be handed (its error was
  // reported as unraisable): a 500, so that the connection goes on.
  void internal_error(uint64_t connection, uint64_t seq) {
    write_infer_reply(connection, seq, 500,
                      "{\"error\": \"internal error: the request could not be handed to the routes\"}", -1);
  }

  static nb::object latin1(const std::string& text) {
    PyObject* decoded = PyUnicode_DecodeLatin1(text.data(), static_cast<Py_ssize_t>(text.size()), nullptr);
    if (decoded == nullptr) throw nb::python_error();
    return nb::steal(decoded);
  }

  // Numbers the next reply of `connection` (its slot in the ordered output).
  uint64_t open_entry(Connection& connection, bool close, bool head = false) {
    std::lock_guard<std::mutex> lock(connection.mutex);
    const uint64_t seq = connection.next_seq++;
    Outgoing& entry = connection.pending[seq];
    entry.close = close;
    entry.head = head;
    ++connection.unanswered;
    {
      std::lock_guard<std::mutex> all(mutex_);
      ++unanswered_;
    }
    return seq;
  }

  template <typename Fill>
  void append(uint64_t id, uint64_t seq, Fill&& fill) {
    std::shared_ptr<Connection> connection = find(id);
    if (!connection) return;  // closed meanwhile: the reply has nobody to go to
    std::lock_guard<std::mutex> lock(connection->mutex);
    auto it = connection->pending.find(seq);
    if (connection->closed || it == connection->pending.end() || it->second.done) return;
    fill(it->second);
    if (it->second.done) {
      it->second.cancel = nullptr;
      answered(*connection);
    }
    if (seq == connection->send_seq) advance(*connection);
  }

  void answered(Connection& connection) {
    --connection.unanswered;
    connection.last_active = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> all(mutex_);
    if (--unanswered_ == 0) drained_.notify_all();
  }

  // Moves the replies that are next in order to the output, and writes.
  void advance(Connection& connection) {
    while (true) {
      auto it = connection.pending.find(connection.send_seq);
      if (it == connection.pending.end()) break;
      if (connection.out.empty()) {
        connection.out.swap(it->second.bytes);
        connection.out_at = 0;
      } else {
        connection.out += it->second.bytes;
      }
      it->second.bytes.clear();
      if (!it->second.done) break;
      const bool close = it->second.close;
      connection.pending.erase(it);
      ++connection.send_seq;
      if (close) {
        connection.close_when_written = true;
        break;
      }
    }
    write_out(connection);
  }

  void write_out(Connection& connection) {
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
    if (connection.paused && !connection.backlogged()) {
      connection.paused = false;
      watch(connection, false);
    }
    if (connection.close_when_written) ::shutdown(connection.fd, SHUT_WR);
  }

  void watch(Connection& connection, bool out) {
    epoll_event event{};
    event.events = (connection.peer_eof || connection.paused ? 0u : EPOLLIN | EPOLLRDHUP) |
                   (out ? EPOLLOUT : 0u);
    event.data.ptr = &connection;
    epoll_ctl(connection.epoll_fd, EPOLL_CTL_MOD, connection.fd, &event);
    connection.want_out = out;
  }

  std::shared_ptr<Connection> find(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = connections_.find(id);
    return it == connections_.end() ? nullptr : it->second;
  }

  void close_connection(Connection& connection) {
    size_t unanswered;
    std::vector<std::function<void()>> cancels;  // run once the locks are let go
    {
      std::lock_guard<std::mutex> lock(connection.mutex);
      if (connection.closed) return;
      connection.closed = true;
      epoll_ctl(connection.epoll_fd, EPOLL_CTL_DEL, connection.fd, nullptr);
      ::close(connection.fd);
      unanswered = connection.unanswered;
      for (auto& [seq, entry] : connection.pending) {
        if (entry.cancel) cancels.push_back(std::move(entry.cancel));
      }
      connection.pending.clear();
      connection.unanswered = 0;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      connections_.erase(connection.id);
      unanswered_ -= unanswered;
      if (unanswered != 0 && unanswered_ == 0) drained_.notify_all();
    }
    for (const std::function<void()>& cancel : cancels) cancel();
    if (unanswered != 0) {
      GilAcquire gil;
      try {
        closed_(connection.id);
      } catch (nb::python_error& error) {
        error.discard_as_unraisable(closed_);
      }
    }
  }

  // llhttp's callbacks (parser->data is the Connection).
  static Connection& of(llhttp_t* parser) { return *static_cast<Connection*>(parser->data); }

  static int on_message_begin(llhttp_t* parser) {
    Connection& c = of(parser);
    c.url.clear();
    c.field.clear();
    c.value.clear();
    c.headers.clear();
    c.body.clear();
    c.in_message = true;
    return 0;
  }
  static int on_url(llhttp_t* parser, const char* at, size_t length) {
    of(parser).url.append(at, length);
    return 0;
  }
  static int on_header_field(llhttp_t* parser, const char* at, size_t length) {
    Connection& c = of(parser);
    c.field.append(at, length);
    return 0;
  }
  static int on_header_value(llhttp_t* parser, const char* at, size_t length) {
    of(parser).value.append(at, length);
    return 0;
  }
  static int on_header_value_complete(llhttp_t* parser) {
    Connection& c = of(parser);
    c.headers.emplace_back(lower(std::move(c.field)), std::move(c.value));
    c.field.clear();
    c.value.clear();
    return 0;
  }
  static int on_headers_complete(llhttp_t* parser) {
    Connection& c = of(parser);
    HttpTransport& t = *c.transport;
    if ((parser->flags & F_CONTENT_LENGTH) != 0 && parser->content_length > t.max_body_) {
      t.hand_refused(c, static_cast<int64_t>(parser->content_length), "too large");
      return -1;
    }
    for (const auto& [name, value] : c.headers) {
      if (name == "expect" && lower(value) == "100-continue") {
        // The interim answer, in order: after the replies before it.
        std::lock_guard<std::mutex> lock(c.mutex);
        const uint64_t seq = c.next_seq++;
        Outgoing& entry = c.pending[seq];
        entry.bytes = kContinue;
        entry.done = true;
        if (seq == c.send_seq) t.advance(c);
      }
    }
    return 0;
  }
  static int on_body(llhttp_t* parser, const char* at, size_t length) {
    Connection& c = of(parser);
    HttpTransport& t = *c.transport;
    if (c.body.size() + length > t.max_body_) {
      t.hand_refused(c, static_cast<int64_t>(c.body.size() + length), "too large");
      return -1;
    }
    c.body.append(at, length);
    return 0;
  }
  static int on_message_complete(llhttp_t* parser) {
    Connection& c = of(parser);
    HttpTransport& t = *c.transport;
    const bool keep_alive = llhttp_should_keep_alive(parser) != 0;
    const uint64_t seq = t.open_entry(c, !keep_alive, parser->method == HTTP_HEAD);
    c.in_message = false;
    if (!keep_alive) c.reading_stopped = true;
    bool handed = false;
    {
      GilAcquire gil;
      try {
        nb::bytes body(c.body.data(), c.body.size());
        bool taken = false;
        if (t.infer_server_ != nullptr) {
          try {
            taken = t.try_infer(c, seq, parser, body);
          } catch (nb::python_error& error) {
            error.discard_as_unraisable(t.json_loads_);
          } catch (const std::exception&) {
            // not submitted (kserve_infer_reply discards on failure): Python answers
          }
        }
        if (!taken) {
          nb::dict headers;
          for (const auto& [name, value] : c.headers) {
            nb::object key = latin1(name);
            headers[key] = latin1(value);
          }
          t.dispatch_(c.id, seq, llhttp_method_name(static_cast<llhttp_method_t>(parser->method)),
                      latin1(c.url), headers, body);
        }
        handed = true;
      } catch (nb::python_error& error) {
        error.discard_as_unraisable(t.dispatch_);
      } catch (const std::exception&) {
      }
    }
    if (!handed) t.internal_error(c.id, seq);
    c.body.clear();
    if (c.body.capacity() > kReadChunk) c.body.shrink_to_fit();
    return 0;
  }

  // The native infer route: the plain binary-tensor request to
  // /v2/models/{m}[/versions/{v}]/infer (no query, no escapes, no
  // content or accept encoding) is built and submitted here, under the
  // GIL for json.loads of its header, and answered from Triton's thread;
  // false (nothing submitted) hands it to Python.
  bool try_infer(Connection& c, uint64_t seq, llhttp_t* parser, nb::bytes& body) {
    if (parser->method != HTTP_POST) return false;
    std::string_view url(c.url);
    constexpr std::string_view kPrefix = "/v2/models/";
    if (url.substr(0, kPrefix.size()) != kPrefix || url.find_first_of("?%#") != std::string_view::npos) {
      return false;
    }
    std::vector<std::string_view> parts;
    for (size_t at = kPrefix.size(); at <= url.size();) {
      const size_t slash = std::min(url.find('/', at), url.size());
      parts.push_back(url.substr(at, slash - at));
      at = slash + 1;
    }
    int64_t version = -1;
    if (parts.size() == 4 && parts[1] == "versions" && parts[3] == "infer" && !parts[2].empty() &&
        parts[2].size() < 18 && parts[2].find_first_not_of("0123456789") == std::string_view::npos) {
      version = std::stoll(std::string(parts[2]));
    } else if (parts.size() != 2 || parts[1] != "infer") {
      return false;
    }
    if (parts[0].empty()) return false;
    const std::string* header_length_text = nullptr;
    for (const auto& [name, value] : c.headers) {
      if (name == "inference-header-content-length") header_length_text = &value;
      if (name == "content-encoding" || name == "accept-encoding") return false;
    }
    if (header_length_text == nullptr || header_length_text->empty() || header_length_text->size() > 18 ||
        header_length_text->find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    const size_t header_length = std::stoull(*header_length_text);
    if (header_length > c.body.size()) return false;
    PyObject* header = PyBytes_FromStringAndSize(c.body.data(), static_cast<Py_ssize_t>(header_length));
    if (header == nullptr) throw nb::python_error();
    PyObject* document = PyObject_CallOneArg(json_loads_.ptr(), header);
    Py_DECREF(header);
    if (document == nullptr) {
      PyErr_Clear();
      return false;  // the general path words the error
    }
    nb::object held = nb::steal(document);
    if (!PyDict_CheckExact(document)) return false;
    std::shared_ptr<Alive> alive = alive_;
    const uint64_t id = c.id;
    std::function<void()> cancel;
    if (!kserve_infer_reply(
            *infer_server_, std::string(parts[0]), version, held, body, header_length,
            [alive, id, seq](int status, std::string reply, int64_t reply_header_length) {
              std::lock_guard<std::mutex> lock(alive->mutex);
              if (alive->transport != nullptr) {
                alive->transport->write_infer_reply(id, seq, status, reply, reply_header_length);
              }
            },
            &cancel)) {
      return false;
    }
    // Kept until answered: a client that leaves first cancels it.
    std::lock_guard<std::mutex> lock(c.mutex);
    auto entry = c.pending.find(seq);
    if (entry != c.pending.end() && !entry->second.done) entry->second.cancel = std::move(cancel);
    return true;
  }

  // The transport as its late infer replies find it (null once destroyed).
  struct Alive {
    explicit Alive(HttpTransport* t) : transport(t) {}
    std::mutex mutex;
    HttpTransport* transport;
  };
  std::shared_ptr<Alive> alive_ = std::make_shared<Alive>(this);
  Server* infer_server_ = nullptr;
  nb::object infer_server_object_, json_loads_;

  int listen_fd_;
  const size_t max_body_;
  nb::object dispatch_, refused_, closed_;
  llhttp_settings_t settings_;
  std::vector<Loop> loops_;
  char wake_marker_ = 0;
  std::atomic<bool> stopping_{false};

  std::mutex mutex_;  // guards the members below
  std::condition_variable drained_;
  bool accepting_ = true;
  uint64_t last_id_ = 0;
  size_t unanswered_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<Connection>> connections_;
};

}  // namespace

void bind_http_transport(nb::module_& m) {
  nb::class_<HttpTransport>(m, "HttpTransport")
      .def(nb::init<int, int, size_t, nb::object, nb::object, nb::object>(), "listen_fd"_a,
           "io_threads"_a, "max_body"_a, "dispatch"_a, "refused"_a, "closed"_a)
      .def_prop_ro("io_threads", &HttpTransport::io_threads)
      .def("serve_io", &HttpTransport::serve_io, "index"_a)
      .def("reply", &HttpTransport::reply, "connection"_a, "seq"_a, "status"_a, "headers"_a, "body"_a)
      .def("reply_start", &HttpTransport::reply_start, "connection"_a, "seq"_a, "status"_a, "headers"_a)
      .def("reply_chunk", &HttpTransport::reply_chunk, "connection"_a, "seq"_a, "chunk"_a)
      .def("reply_end", &HttpTransport::reply_end, "connection"_a, "seq"_a)
      .def("enable_infer", &HttpTransport::enable_infer, "server"_a, "json_loads"_a)
      .def("stop", &HttpTransport::stop, "grace_s"_a)
      .def("close_all", &HttpTransport::close_all);
}

}  // namespace tsb
