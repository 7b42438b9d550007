#include "http_transport.h"

#include <llhttp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nanobind/stl/string.h>

#include "kserve_infer.h"
#include "python_callback.h"
#include "socket_server.h"
#include "server.h"
#include "thread_state.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace tsb {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// A connection is not read while this many of its replies are pending (a
// client that pipelines without reading), or while its output backs up
// (SocketServer's limit): its socket's buffers then hold it back.
constexpr size_t kMaxPending = 64;
// A keep-alive connection idle between requests stays open until the
// client closes it, as with NVIDIA's binary (libevhtp without timeouts).
constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
// A request's line and headers (their bytes as sent, without the line
// ends), at most: past it the request is refused (400) and the connection
// closes, before more of it is kept.
constexpr size_t kMaxHead = 64 * 1024;

class HttpTransport;

// One reply of a connection, in request order: its bytes not yet moved to
// the socket's output, whether it is whole, and whether the connection
// closes after it.
struct Outgoing {
  std::string bytes;
  bool done = false;
  bool close = false;
  bool keep_alive_1_0 = false;  // an HTTP/1.0 request that asked to keep the connection
  bool head = false;  // the answer to HEAD: no body
  std::function<void()> cancel;  // a native infer request's, until answered
};

struct Connection : SocketConnection {
  HttpTransport* transport = nullptr;

  // The I/O thread's own (parsing).
  llhttp_t parser;
  std::string url, field, value;
  size_t head_bytes = 0;  // the request line's and headers' so far (kMaxHead)
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool in_message = false;      // a request begun, not yet whole
  bool refused = false;         // this request was handed to `refused`
  bool reading_stopped = false; // input after a closing request is dropped

  // Under `mutex`: the ordered output.
  uint64_t next_seq = 0;  // the next request's (or interim answer's) number
  uint64_t send_seq = 0;  // the reply being written
  std::map<uint64_t, Outgoing> pending;
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

// A reply's Connection field: "close" when the connection closes after it;
// "keep-alive" to an HTTP/1.0 request that asked for it (HTTP/1.0 closes
// otherwise), as the binary answers; none for HTTP/1.1's default.
const char* connection_field(const Outgoing& entry) {
  if (entry.close) return "connection: close\r\n";
  return entry.keep_alive_1_0 ? "connection: keep-alive\r\n" : "";
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return text;
}

class HttpTransport : public SocketServer {
 public:
  HttpTransport(int listen_fd, int io_threads, size_t max_body, nb::object dispatch,
                nb::object refused, nb::object closed)
      : SocketServer(listen_fd, io_threads, "HttpTransport"), max_body_(max_body),
        dispatch_(std::move(dispatch)), refused_(std::move(refused)), closed_(std::move(closed)) {
    llhttp_settings_init(&settings_);
    settings_.on_message_begin = &HttpTransport::on_message_begin;
    settings_.on_url = &HttpTransport::on_url;
    settings_.on_header_field = &HttpTransport::on_header_field;
    settings_.on_header_value = &HttpTransport::on_header_value;
    settings_.on_header_value_complete = &HttpTransport::on_header_value_complete;
    settings_.on_headers_complete = &HttpTransport::on_headers_complete;
    settings_.on_body = &HttpTransport::on_body;
    settings_.on_message_complete = &HttpTransport::on_message_complete;
  }

  ~HttpTransport() {
    {
      std::lock_guard<std::mutex> lock(alive_->mutex);
      alive_->transport = nullptr;  // late infer replies go nowhere
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
  // (`server`: the native Server).
  void enable_infer(nb::object server) {
    infer_server_ = nb::cast<Server*>(server);
    infer_server_object_ = std::move(server);
  }

  // Without the GIL.
  void write_reply(uint64_t connection, uint64_t seq, const std::string& head, const char* data,
                   size_t size) {
    append(connection, seq, [&](Outgoing& entry) {
      entry.bytes.reserve(head.size() + size + 64);
      entry.bytes += head;
      entry.bytes += "content-length: ";
      entry.bytes += std::to_string(size);
      entry.bytes += "\r\n";
      entry.bytes += connection_field(entry);
      entry.bytes += "\r\n";
      if (!entry.head) entry.bytes.append(data, size);
      entry.done = true;
    });
  }

  void reply_start(uint64_t connection, uint64_t seq, int status, nb::handle headers) {
    std::string head = response_head(status, headers);
    GilRelease release;
    append(connection, seq, [&](Outgoing& entry) {
      entry.bytes += head;
      entry.bytes += "transfer-encoding: chunked\r\n";
      entry.bytes += connection_field(entry);
      entry.bytes += "\r\n";
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

 private:
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
  uint64_t open_entry(Connection& connection, bool close, bool head = false, bool keep_alive_1_0 = false) {
    std::lock_guard<std::mutex> lock(connection.mutex);
    const uint64_t seq = connection.next_seq++;
    Outgoing& entry = connection.pending[seq];
    entry.close = close;
    entry.keep_alive_1_0 = keep_alive_1_0;
    entry.head = head;
    opened_call(connection);
    return seq;
  }

  template <typename Fill>
  void append(uint64_t id, uint64_t seq, Fill&& fill) {
    std::shared_ptr<Connection> connection = std::static_pointer_cast<Connection>(find(id));
    if (!connection) return;  // closed meanwhile: the reply has nobody to go to
    std::lock_guard<std::mutex> lock(connection->mutex);
    auto it = connection->pending.find(seq);
    if (connection->closed || it == connection->pending.end() || it->second.done) return;
    fill(it->second);
    if (it->second.done) {
      it->second.cancel = nullptr;
      answered_call(*connection);
    }
    if (seq == connection->send_seq) advance(*connection);
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

  // SocketServer's: the HTTP side of a connection.
  std::shared_ptr<SocketConnection> make_connection() override {
    auto connection = std::make_shared<Connection>();
    connection->transport = this;
    llhttp_init(&connection->parser, HTTP_REQUEST, &settings_);
    // A body with both Transfer-Encoding: chunked and Content-Length (as
    // `requests` sends a pre-chunked body) is read chunked, its
    // Content-Length ignored: the binary's reading (RFC 9112 6.3).
    llhttp_set_lenient_chunked_length(&connection->parser, 1);
    connection->parser.data = connection.get();
    return connection;
  }

  void on_input(SocketConnection& connection, const char* data, size_t size) override {
    Connection& c = static_cast<Connection&>(connection);
    if (!c.reading_stopped) parse(c, data, size);
  }

  // A client that ends its side after a request the transport refused
  // (e.g. `curl` after a body too large) still gets the refusal: reading
  // stops, and the hang-up after the reply's shutdown closes. Any other
  // end of input is a client that left (its requests are cancelled).
  bool on_peer_eof(SocketConnection& connection) override {
    Connection& c = static_cast<Connection&>(connection);
    std::lock_guard<std::mutex> lock(c.mutex);
    return c.refused && c.unanswered != 0;
  }

  bool backlogged(const SocketConnection& connection) const override {
    return static_cast<const Connection&>(connection).pending.size() >= kMaxPending ||
           SocketServer::backlogged(connection);
  }

  void abandon(SocketConnection& connection, std::vector<std::function<void()>>& cancels) override {
    Connection& c = static_cast<Connection&>(connection);
    for (auto& [seq, entry] : c.pending) {
      if (entry.cancel) cancels.push_back(std::move(entry.cancel));
    }
    c.pending.clear();
  }

  void abandoned(uint64_t connection) override { call_reporting(closed_, connection); }

  // llhttp's callbacks (parser->data is the Connection).
  static Connection& of(llhttp_t* parser) { return *static_cast<Connection*>(parser->data); }

  static int on_message_begin(llhttp_t* parser) {
    Connection& c = of(parser);
    c.url.clear();
    c.field.clear();
    c.value.clear();
    c.headers.clear();
    c.body.clear();
    c.head_bytes = 0;
    c.in_message = true;
    return 0;
  }
  // Counts `length` more bytes of the request's head: false (the request
  // refused) past kMaxHead.
  static bool head_fits(Connection& c, size_t length) {
    c.head_bytes += length;
    if (c.head_bytes <= kMaxHead) return true;
    c.transport->hand_refused(c, -1, "the request line and headers are larger than " + std::to_string(kMaxHead) +
                                         " bytes: send large data in the body");
    return false;
  }
  static int on_url(llhttp_t* parser, const char* at, size_t length) {
    Connection& c = of(parser);
    if (!head_fits(c, length)) return -1;
    c.url.append(at, length);
    return 0;
  }
  static int on_header_field(llhttp_t* parser, const char* at, size_t length) {
    Connection& c = of(parser);
    if (!head_fits(c, length)) return -1;
    c.field.append(at, length);
    return 0;
  }
  static int on_header_value(llhttp_t* parser, const char* at, size_t length) {
    Connection& c = of(parser);
    if (!head_fits(c, length)) return -1;
    c.value.append(at, length);
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
    if ((parser->flags & (F_CONTENT_LENGTH | F_CHUNKED)) == F_CONTENT_LENGTH &&
        parser->content_length > t.max_body_) {
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
    const bool http_1_0 = parser->http_major == 1 && parser->http_minor == 0;
    const uint64_t seq = t.open_entry(c, !keep_alive, parser->method == HTTP_HEAD, http_1_0 && keep_alive);
    c.in_message = false;
    if (!keep_alive) c.reading_stopped = true;
    // The native infer route first, without the GIL; anything else (and
    // what it does not cover) to Python.
    bool handed = t.infer_server_ != nullptr && t.try_infer(c, seq, parser);
    if (!handed) {
      GilAcquire gil;
      try {
        nb::dict headers;
        for (const auto& [name, value] : c.headers) {
          nb::object key = latin1(name);
          headers[key] = latin1(value);
        }
        t.dispatch_(c.id, seq, llhttp_method_name(static_cast<llhttp_method_t>(parser->method)),
                    latin1(c.url), headers, nb::bytes(c.body.data(), c.body.size()));
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
  // content or accept encoding), read, built and submitted by
  // kserve_infer_reply (the GIL only to build and submit it) and answered
  // from Triton's thread; false (nothing submitted) hands it to Python.
  // Called without the GIL.
  bool try_infer(Connection& c, uint64_t seq, llhttp_t* parser) {
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
    std::shared_ptr<Alive> alive = alive_;
    const uint64_t id = c.id;
    std::function<void()> cancel;
    if (!kserve_infer_reply(
            *infer_server_, std::string(parts[0]), version, c.body.data(), c.body.size(), header_length,
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
  nb::object infer_server_object_;

  const size_t max_body_;
  nb::object dispatch_, refused_, closed_;
  llhttp_settings_t settings_;
};

}  // namespace

void bind_http_transport(nb::module_& m) {
  nb::class_<HttpTransport>(m, "HttpTransport")
      .def(nb::init<int, int, size_t, nb::object, nb::object, nb::object>(), "listen_fd"_a,
           "io_threads"_a, "max_body"_a, "dispatch"_a, "refused"_a, "closed"_a)
      .def_prop_ro("io_threads", [](const HttpTransport& t) { return t.io_threads(); })
      .def("serve_io", [](HttpTransport& t, int index) { t.serve_io(index); }, "index"_a,
           nb::call_guard<GilRelease>())
      .def("reply", &HttpTransport::reply, "connection"_a, "seq"_a, "status"_a, "headers"_a, "body"_a)
      .def("reply_start", &HttpTransport::reply_start, "connection"_a, "seq"_a, "status"_a, "headers"_a)
      .def("reply_chunk", &HttpTransport::reply_chunk, "connection"_a, "seq"_a, "chunk"_a)
      .def("reply_end", &HttpTransport::reply_end, "connection"_a, "seq"_a)
      .def("enable_infer", &HttpTransport::enable_infer, "server"_a)
      .def("stop", [](HttpTransport& t, double grace_s) { return t.stop(grace_s); }, "grace_s"_a,
           nb::call_guard<GilRelease>())
      .def("close_all", [](HttpTransport& t) { t.close_all(); });
}

}  // namespace tsb
