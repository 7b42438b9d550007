#include "grpc_transport.h"

#include <nghttp2/nghttp2.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nanobind/stl/string.h>

#include "errors.h"
#include "grpc_compression.h"
#include "infer_response_message.h"
#include "kserve_infer.h"
#include "model_infer_request.h"
#include "request.h"
#include "response.h"
#include "server.h"
#include "python_callback.h"
#include "socket_server.h"
#include "thread_state.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace tsb {
namespace {

// The HTTP/2 settings the transport announces: concurrent streams per
// connection, and the flow-control windows (a stream's, the connection's)
// the client may send ahead of what the transport has taken.
constexpr uint32_t kMaxConcurrentStreams = 1024;
constexpr int32_t kStreamWindow = 4 * 1024 * 1024;
constexpr int32_t kConnectionWindow = 16 * 1024 * 1024;
// How much of nghttp2's output is moved to the connection's buffer at once.
constexpr size_t kOutputHighWater = 1024 * 1024;
// A stream's backlog (its messages Python has not taken yet, and its
// output nghttp2 has not taken: its client not reading) past which what
// the client sends on it is not given back as window, and past which
// send() tells the servicer to wait: a client that streams requests and
// reads no responses is stopped, not read into memory without end.
constexpr size_t kStreamBacklog = 16 * 1024 * 1024;
constexpr size_t kPrefix = 5;  // gRPC's message prefix: a compressed flag, a big-endian length

// grpc-status codes the transport answers itself.
constexpr int kResourceExhausted = 8;
constexpr int kInternal = 13;

constexpr std::string_view kModelInfer = "/inference.GRPCInferenceService/ModelInfer";
constexpr std::string_view kModelStreamInfer = "/inference.GRPCInferenceService/ModelStreamInfer";
// A stream's native requests in the core past which its next messages go to
// the servicer, whose flow then holds the client (stream_flow.py's MAX_IN_FLIGHT).
constexpr size_t kMaxStreamInFlight = 256;
// A call's request headers, counted as HTTP/2 counts a header list (name,
// value and 32 bytes each): beyond this the call is refused, as gRPC's own
// servers refuse it past their hard limit (16 KiB by default), and what
// comes beyond is not kept.
constexpr size_t kMaxHeaderList = 16 * 1024;

struct Stream {
  int32_t id = 0;
  // The I/O thread's own, until handed on.
  std::string path, method, content_type;
  std::vector<std::pair<std::string, std::string>> metadata;
  size_t header_list = 0;  // the request headers' size so far (kMaxHeaderList)
  std::string in;  // a message not whole yet
  bool refused = false;  // answered by the transport: its input is dropped
  // Its messages' grpc-encoding (a name none of the transport's, kept for
  // the refusal, makes `encoding_unknown`), the encodings its client
  // accepts (grpc-accept-encoding), and so the one of its responses.
  GrpcEncoding encoding = GrpcEncoding::identity;
  std::optional<std::string> encoding_unknown;
  unsigned accepted = 0;
  GrpcEncoding response = GrpcEncoding::identity;

  // Under the connection's mutex.
  bool handed = false;    // Python has it (a call in flight until finished)
  bool announced = false; // its path and metadata went in an event (a unary call's with its message or end)
  bool finished = false;  // its status is queued
  bool started = false;   // response headers submitted
  std::string out;        // framed messages not yet taken by nghttp2
  size_t out_at = 0;
  size_t untaken = 0;     // bytes of the messages handed to Python and not taken yet (taken())
  size_t held = 0;        // bytes received whose window is held back (kStreamBacklog)
  // ModelStreamInfer: its plain messages may be served natively (not with
  // triton_grpc_error, which needs the servicer) until one goes to the
  // servicer, which then has the rest; those in the core by key (their
  // cancels, set once submitted), and the status the servicer gave while
  // some were, queued once they are answered.
  bool end_at_error = false;
  bool native_stream = false;
  uint64_t next_native = 0;
  std::unordered_map<uint64_t, std::function<void()>> native_requests;
  std::optional<std::pair<int, std::string>> deferred_status;
  // Answers written in the order of their requests (a model that is not
  // decoupled, as the binary's stream_infer_handler.cc writes them; a
  // decoupled model's as they come): the native requests of such models in
  // the order submitted, each with its message once answered, and behind
  // them the servicer's messages sent in turn (its requests came after; it
  // orders its own), written as the head is answered. Empty when nothing
  // waits: a message then goes at once.
  struct InOrder {
    uint64_t key;  // a native request's (0 for the servicer's)
    bool answered;
    std::optional<std::string> message;  // its one message, if any
    bool compressed = false;              // that message is in the stream's `response` encoding
  };
  std::deque<InOrder> in_order;
  size_t in_order_bytes = 0;  // of the messages waiting there

  size_t unsent() const { return out.size() - out_at + in_order_bytes; }
  size_t backlog() const { return untaken + unsent(); }
  int status = 0;
  std::string status_message;
  std::function<void()> cancel;  // a native ModelInfer's, until answered
};

// What one read of a connection hands to Python, per stream, in order.
struct Event {
  int32_t stream = 0;
  bool opened = false;  // carries path and metadata
  std::string path;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<std::string> messages;
  bool native_stream = false;  // its messages may be served natively (Stream::native_stream)
  GrpcEncoding response = GrpcEncoding::identity;  // its responses' (Stream::response)
  bool ended = false;      // the client half-closed
  bool cancelled = false;  // reset by the client, or refused by the transport after it was handed
};

class GrpcTransport;

struct Connection : SocketConnection {
  GrpcTransport* transport = nullptr;
  nghttp2_session* session = nullptr;
  std::unordered_map<int32_t, std::unique_ptr<Stream>> streams;
  std::vector<Event> events;  // filled under the mutex by nghttp2's callbacks while reading
  std::vector<std::function<void()>> cancels;  // of streams reset while reading: run once unlocked
  std::vector<int32_t> holding;  // streams whose window is held back
  bool failed = false;        // a protocol error: closes once its GOAWAY is written

  ~Connection() override {
    if (session != nullptr) nghttp2_session_del(session);
  }

  Stream* stream(int32_t id) {
    auto it = streams.find(id);
    return it == streams.end() ? nullptr : it->second.get();
  }

  Event& event(int32_t id) {
    if (events.empty() || events.back().stream != id) {
      events.emplace_back();
      events.back().stream = id;
    }
    return events.back();
  }
};

// grpc-message's percent-encoding (the gRPC spec: bytes outside
// printable ASCII, and '%').
std::string percent_encode(std::string_view text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string encoded;
  encoded.reserve(text.size());
  for (unsigned char c : text) {
    if (c < 0x20 || c > 0x7e || c == '%') {
      encoded += '%';
      encoded += kHex[c >> 4];
      encoded += kHex[c & 15];
    } else {
      encoded += static_cast<char>(c);
    }
  }
  return encoded;
}

nghttp2_nv header(std::string_view name, std::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
                    NGHTTP2_NV_FLAG_NONE};
}

class GrpcTransport : public SocketServer {
 public:
  // `compression_level`: infer responses' (1 LOW, 2 MED, 3 HIGH; 0 NONE),
  // as the binary's --grpc-infer-response-compression-level
  // (grpc_compression.h's response_encoding).
  GrpcTransport(int listen_fd, int io_threads, size_t max_message, int compression_level, nb::object dispatch,
                nb::object closed)
      : SocketServer(listen_fd, io_threads, "GrpcTransport"), max_message_(max_message),
        compression_level_(compression_level), dispatch_(std::move(dispatch)), closed_(std::move(closed)) {
    nghttp2_session_callbacks_new(&callbacks_);
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks_, &GrpcTransport::on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks_, &GrpcTransport::on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks_, &GrpcTransport::on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks_, &GrpcTransport::on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks_, &GrpcTransport::on_stream_close);
  }

  ~GrpcTransport() override {
    {
      std::lock_guard<std::mutex> lock(alive_->mutex);
      alive_->transport = nullptr;  // late native infer answers go nowhere
    }
    nghttp2_session_callbacks_del(callbacks_);
  }

  // Serves the plain ModelInfer natively from now on (the request read by
  // model_infer_request.cc; anything it declines goes to the servicer);
  // `error(code, message)` gives the (grpc status, message) of a core
  // error as the servicer words it (tritonserver/_kserve/grpc_service.py).
  // `stream_error(code, message)` gives the error_message text a
  // ModelStreamInfer response carries for a core error.
  void enable_infer(nb::object server, nb::object error, nb::object stream_error) {
    infer_server_ = nb::cast<Server*>(server);
    infer_server_object_ = std::move(server);
    error_ = std::move(error);
    stream_error_ = std::move(stream_error);
  }

  // How many ModelInfer calls took the native path.
  uint64_t native_infers() const { return native_infers_.load(std::memory_order_relaxed); }
  // How many ModelStreamInfer messages took the native path.
  uint64_t native_stream_infers() const { return native_stream_infers_.load(std::memory_order_relaxed); }

  // On Triton's thread, with the GIL (ThreadGil), under alive_->mutex: a
  // native ModelInfer's error (a TRITONSERVER_Error_Code and its message),
  // worded as the servicer words it.
  void infer_error(uint64_t connection, int32_t stream, int error_code, std::string_view message) {
    int code = kInternal;
    std::string text;
    try {
      nb::tuple status = nb::cast<nb::tuple>(error_(error_code, nb::str(message.data(), message.size())));
      code = nb::cast<int>(status[0]);
      text = nb::cast<std::string>(status[1]);
    } catch (nb::python_error& error) {
      error.discard_as_unraisable(error_);
      text = "internal error wording an infer error (reported as unraisable)";
    } catch (const std::exception& error) {
      text = std::string("internal error wording an infer error: ") + error.what();
    }
    respond(connection, stream, nullptr, 0, code, text);
  }

  // A call's next message (framed here), its response headers first;
  // `in_turn`: a ModelStreamInfer answer of a model that is not decoupled,
  // written after the stream's native answers still awaited
  // (Stream::in_order). True when the stream's output backs up (its client
  // not reading): the servicer waits until backed_up() is false before it
  // sends more.
  bool send(uint64_t connection, int32_t stream, nb::bytes message, bool in_turn) {
    const char* data = message.c_str();
    const size_t size = message.size();
    GilRelease release;
    return respond(connection, stream, data, size, std::nullopt, std::string_view(), in_turn);
  }

  // Whether a stream's output not yet taken by nghttp2 is kStreamBacklog
  // or more (false once it is gone).
  bool backed_up(uint64_t connection, int32_t stream_id) {
    std::shared_ptr<Connection> c = std::static_pointer_cast<Connection>(find(connection));
    if (!c) return false;
    std::lock_guard<std::mutex> lock(c->mutex);
    const Stream* stream = c->stream(stream_id);
    return !c->closed && stream != nullptr && stream->unsent() >= kStreamBacklog;
  }

  // The servicer took `size` bytes of a stream's messages (each message's
  // length): their window is given back once the stream's backlog allows.
  void taken(uint64_t connection, int32_t stream_id, size_t size) {
    std::shared_ptr<Connection> c = std::static_pointer_cast<Connection>(find(connection));
    if (!c) return;
    std::lock_guard<std::mutex> lock(c->mutex);
    Stream* stream = c->stream(stream_id);
    if (c->closed || stream == nullptr) return;
    stream->untaken -= std::min(stream->untaken, size + kPrefix);
    if (stream->held != 0) flush(*c);
  }

  // A call's status: grpc-status `code`, grpc-message `message` (trailers).
  void finish(uint64_t connection, int32_t stream, int code, const std::string& message) {
    GilRelease release;
    respond(connection, stream, nullptr, 0, code, message);
  }

  // A unary call's answer: its one message and status OK.
  void reply(uint64_t connection, int32_t stream, nb::bytes message) {
    const char* data = message.c_str();
    const size_t size = message.size();
    GilRelease release;
    respond(connection, stream, data, size, 0, std::string_view());
  }

 private:
  // -- SocketServer's --------------------------------------------------------
  std::shared_ptr<SocketConnection> make_connection() override {
    auto connection = std::make_shared<Connection>();
    connection->transport = this;
    nghttp2_option* option = nullptr;
    nghttp2_option_new(&option);
    // Window updates given by on_data_chunk and release_held (a stream's
    // held back while its backlog is kStreamBacklog or more); header lists
    // up to 16 MiB (the binary's default is 16 KiB; more is harmless).
    // Header values with leading or trailing spaces or tabs are taken as
    // sent, as grpc's server does (RFC 9113's check would reset the stream).
    nghttp2_option_set_no_auto_window_update(option, 1);
    nghttp2_option_set_max_send_header_block_length(option, 16 * 1024 * 1024);
    nghttp2_option_set_no_rfc9113_leading_and_trailing_ws_validation(option, 1);
    const int made = nghttp2_session_server_new2(&connection->session, callbacks_, connection.get(), option);
    nghttp2_option_del(option);
    if (made != 0) throw std::bad_alloc();
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(kStreamWindow)},
    };
    nghttp2_submit_settings(connection->session, NGHTTP2_FLAG_NONE, settings, 2);
    nghttp2_session_set_local_window_size(connection->session, NGHTTP2_FLAG_NONE, 0, kConnectionWindow);
    return connection;
  }

  void on_input(SocketConnection& base, const char* data, size_t size) override {
    Connection& c = static_cast<Connection&>(base);
    std::vector<Event> events;
    std::vector<std::function<void()>> cancels;
    bool fatal = false;
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      if (c.closed || c.failed) return;
      const ssize_t read = nghttp2_session_mem_recv(c.session, reinterpret_cast<const uint8_t*>(data), size);
      if (read < 0) {
        // A client that does not speak HTTP/2 (bad preface), or a protocol
        // error: nghttp2 queued a GOAWAY where it could; written, then closed.
        c.failed = true;
        fatal = read == NGHTTP2_ERR_BAD_CLIENT_MAGIC;
      }
      events.swap(c.events);
      cancels.swap(c.cancels);
      if (!fatal) flush(c);
    }
    for (const std::function<void()>& cancel : cancels) cancel();
    if (fatal) {
      close_connection(c);
      return;
    }
    hand(c, events);
  }

  // Under the mutex: nghttp2's output to `out` and the socket, until the
  // socket is full or nghttp2 has nothing more.
  void flush(SocketConnection& base) override {
    Connection& c = static_cast<Connection&>(base);
    while (!c.closed) {
      while (c.out.size() - c.out_at < kOutputHighWater) {
        const uint8_t* data = nullptr;
        const ssize_t n = nghttp2_session_mem_send(c.session, &data);
        if (n <= 0) break;
        c.out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
      }
      if (!c.holding.empty()) release_held(c);
      const bool more = nghttp2_session_want_write(c.session) != 0;
      if (!c.out.empty()) {
        if (c.failed || (!more && nghttp2_session_want_read(c.session) == 0)) c.close_when_written = true;
      }
      write_out(c);
      if (!c.out.empty() || !more) break;  // the socket is full, or all is written
    }
    if (c.out.empty() && (c.failed || (nghttp2_session_want_read(c.session) == 0 &&
                                       nghttp2_session_want_write(c.session) == 0))) {
      ::shutdown(c.fd, SHUT_WR);  // the client sees the end, and the hang-up closes
    }
  }

  // Under the mutex: the window held back of each stream whose backlog is
  // under kStreamBacklog again is given back (its WINDOW_UPDATE queued in
  // nghttp2); streams gone meanwhile are dropped from the list.
  static void release_held(Connection& c) {
    for (size_t i = 0; i < c.holding.size();) {
      Stream* stream = c.stream(c.holding[i]);
      if (stream != nullptr && stream->backlog() >= kStreamBacklog) {
        ++i;
        continue;
      }
      if (stream != nullptr) {
        nghttp2_session_consume_stream(c.session, stream->id, stream->held);
        stream->held = 0;
      }
      c.holding[i] = c.holding.back();
      c.holding.pop_back();
    }
  }

  // A graceful stop: GOAWAY (the streams opened so far are served; the
  // client takes newer calls elsewhere, as it does with grpcio's stop).
  void draining(SocketConnection& base) override {
    Connection& c = static_cast<Connection&>(base);
    nghttp2_submit_goaway(c.session, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c.session),
                          NGHTTP2_NO_ERROR, nullptr, 0);
    flush(c);
  }

  void abandon(SocketConnection& base, std::vector<std::function<void()>>& cancels) override {
    Connection& c = static_cast<Connection&>(base);
    for (auto& [id, stream] : c.streams) {
      if (stream->cancel) cancels.push_back(std::move(stream->cancel));
      for (auto& [key, cancel] : stream->native_requests) {
        if (cancel) cancels.push_back(std::move(cancel));
      }
    }
    for (auto& cancel : c.cancels) cancels.push_back(std::move(cancel));
    c.cancels.clear();
    c.streams.clear();
  }

  void abandoned(uint64_t connection) override { call_reporting(closed_, connection); }

  // -- to and from Python -------------------------------------------------------
  // One call of `dispatch` per read: (connection, [(stream, path, metadata,
  // messages, ended, cancelled), ...]).
  void hand(Connection& c, std::vector<Event>& events) {
    if (events.empty()) return;
    // The plain ModelInfer calls, and the plain messages of ModelStreamInfer
    // calls, read and checked before the GIL is taken.
    std::vector<std::unique_ptr<ModelInferPlan>> plans(events.size());
    std::vector<std::vector<std::unique_ptr<ModelInferPlan>>> stream_plans(events.size());
    if (infer_server_ != nullptr) {
      for (size_t i = 0; i < events.size(); ++i) {
        const Event& event = events[i];
        if (event.native_stream && !event.cancelled && !event.messages.empty()) {
          stream_plans[i] = plan_stream_messages(event);
          continue;
        }
        if (!event.opened || !event.ended || event.cancelled || event.messages.size() != 1 ||
            event.path != kModelInfer) {
          continue;
        }
        try {
          auto plan = std::make_unique<ModelInferPlan>();
          const std::string& message = event.messages[0];
          if (plan_model_infer(reinterpret_cast<const unsigned char*>(message.data()), message.size(), plan.get()) &&
              natively_servable(*infer_server_, plan->model_name, plan->model_version)) {
            plans[i] = std::move(plan);  // else a decoupled model, or one the core cannot find: the servicer
          }
        } catch (const std::exception&) {
          // out of memory: the servicer answers
        }
      }
    }
    GilAcquire gil;
    nb::list batch;
    for (size_t i = 0; i < events.size(); ++i) {
      Event& event = events[i];
      try {
        if (plans[i] != nullptr) {
          bool taken = false;
          try {
            taken = try_infer(c, event, *plans[i]);
          } catch (nb::python_error& error) {
            error.discard_as_unraisable(dispatch_);
          } catch (const std::exception&) {
            // nothing submitted: the servicer answers
          }
          if (taken) continue;
        }
        if (!stream_plans[i].empty()) {
          serve_stream_natively(c, event, stream_plans[i]);
          // all its messages served natively: nothing for the servicer
          if (!event.opened && !event.ended && !event.cancelled && event.messages.empty()) continue;
        }
        nb::object path = nb::none(), metadata = nb::none();
        if (event.opened) {
          path = nb::str(event.path.data(), event.path.size());
          nb::list pairs;
          for (const auto& [name, value] : event.metadata) {
            nb::str key(name.data(), name.size());
            const bool binary = name.size() > 4 && name.compare(name.size() - 4, 4, "-bin") == 0;
            if (binary) {
              pairs.append(nb::make_tuple(key, nb::bytes(value.data(), value.size())));
            } else {
              PyObject* text = PyUnicode_DecodeLatin1(value.data(), static_cast<Py_ssize_t>(value.size()), nullptr);
              if (text == nullptr) throw nb::python_error();
              pairs.append(nb::make_tuple(key, nb::steal(text)));
            }
          }
          metadata = std::move(pairs);
        }
        nb::list messages;
        for (const std::string& message : event.messages) messages.append(nb::bytes(message.data(), message.size()));
        batch.append(nb::make_tuple(event.stream, path, metadata, messages, event.ended, event.cancelled));
      } catch (nb::python_error& error) {
        error.discard_as_unraisable(dispatch_);
        if (event.opened) refuse_unhanded(c, event.stream);
      }
    }
    if (batch.size() == 0) return;  // all taken natively: nothing for the loop thread
    try {
      dispatch_(c.id, batch);
    } catch (nb::python_error& error) {
      error.discard_as_unraisable(dispatch_);
      for (const Event& event : events) {
        if (event.opened) refuse_unhanded(c, event.stream);
      }
    }
  }

  // Under the GIL: a call Python could not be handed (its error reported as unraisable).
  void refuse_unhanded(Connection& c, int32_t stream) {
    GilRelease release;
    respond(c.id, stream, nullptr, 0, kInternal, "internal error: the call could not be handed to the service");
  }

  // Queues a message (data != nullptr) and/or the status (code) of a call,
  // from any thread, without the GIL; a message `in_turn` waits behind the
  // stream's native answers in order (Stream::in_order). `packed_already`:
  // whether the message is in the stream's response encoding already (a
  // native answer's, its sink having compressed it or not); unsaid (the
  // servicer's), it is compressed here where the stream's responses are
  // (Stream::response). True when the
  // stream's output backs up (kStreamBacklog) after.
  bool respond(uint64_t id, int32_t stream_id, const char* data, size_t size, std::optional<int> code,
               std::string_view message, bool in_turn = false, std::optional<bool> packed_already = std::nullopt) {
    std::shared_ptr<Connection> c = std::static_pointer_cast<Connection>(find(id));
    if (!c) return false;  // closed meanwhile: nobody to answer
    std::string packed;
    bool compressed = packed_already.value_or(false);
    if (data != nullptr && !packed_already && compress(response_of(*c, stream_id), data, size, &packed)) {
      data = packed.data();
      size = packed.size();
      compressed = true;
    }
    std::lock_guard<std::mutex> lock(c->mutex);
    if (c->closed) return false;
    Stream* stream = c->stream(stream_id);
    if (stream == nullptr || stream->finished) return false;  // reset by the client meanwhile
    if (data == nullptr && code && !stream->native_requests.empty()) {
      stream->deferred_status.emplace(*code, std::string(message));  // after its native requests' answers
      return false;
    }
    if (data != nullptr && in_turn && !stream->in_order.empty()) {  // behind the native answers awaited
      stream->in_order.push_back({0, true, std::string(data, size), compressed});
      stream->in_order_bytes += size;
      if (code) stream->deferred_status.emplace(*code, std::string(message));  // those answers end first
      return stream->unsent() >= kStreamBacklog;
    }
    queue(*c, *stream, data, size, code, message, compressed);
    flush(*c);
    const Stream* after = c->closed ? nullptr : c->stream(stream_id);  // flush may have closed it
    return after != nullptr && after->unsent() >= kStreamBacklog;
  }

  // The encoding of a stream's responses (Stream::response; identity
  // without a compression level, or once the stream is gone).
  GrpcEncoding response_of(Connection& c, int32_t stream_id) {
    if (compression_level_ == 0) return GrpcEncoding::identity;
    std::lock_guard<std::mutex> lock(c.mutex);
    const Stream* stream = c.closed ? nullptr : c.stream(stream_id);
    return stream != nullptr ? stream->response : GrpcEncoding::identity;
  }

  // Without the connection's mutex: a response message compressed into
  // `packed` with `encoding` where that makes it smaller; false: it goes as
  // it is (so too when there is no memory to compress it).
  static bool compress(GrpcEncoding encoding, const char* data, size_t size, std::string* packed) noexcept {
    if (encoding == GrpcEncoding::identity) return false;
    try {
      return deflate_message(encoding, data, size, packed);
    } catch (const std::bad_alloc&) {
      return false;
    }
  }

  // Under the mutex; `compressed`: the message is in the stream's response encoding.
  void queue(Connection& c, Stream& stream, const char* data, size_t size, std::optional<int> code,
             std::string_view message, bool compressed = false) {
    if (data != nullptr) {
      char prefix[kPrefix] = {static_cast<char>(compressed ? 1 : 0), static_cast<char>((size >> 24) & 0xff),
                              static_cast<char>((size >> 16) & 0xff), static_cast<char>((size >> 8) & 0xff),
                              static_cast<char>(size & 0xff)};
      if (stream.out_at == stream.out.size()) {
        stream.out.clear();
        stream.out_at = 0;
      }
      stream.out.append(prefix, kPrefix);
      stream.out.append(data, size);
    }
    if (code) {
      stream.cancel = nullptr;
      stream.finished = true;
      stream.status = *code;
      stream.status_message = percent_encode(message);
      if (stream.handed) answered_call(c);
    }
    if (!stream.started) {
      stream.started = true;
      const std::string status = std::to_string(stream.status);
      if (data == nullptr && code) {
        // Trailers-Only: the status in the one HEADERS frame.
        std::vector<nghttp2_nv> headers = {header(":status", "200"), header("content-type", "application/grpc"),
                                           header("grpc-status", status)};
        if (!stream.status_message.empty()) headers.push_back(header("grpc-message", stream.status_message));
        nghttp2_submit_response(c.session, stream.id, headers.data(), headers.size(), nullptr);
        return;
      }
      // As grpc's servers: its messages' encoding, where compressed, and what it accepts.
      std::vector<nghttp2_nv> headers = {header(":status", "200"), header("content-type", "application/grpc")};
      if (stream.response != GrpcEncoding::identity) {
        headers.push_back(header("grpc-encoding", grpc_encoding_name(stream.response)));
      }
      headers.push_back(header("grpc-accept-encoding", kGrpcAcceptEncoding));
      nghttp2_data_provider provider{};
      provider.source.ptr = &stream;
      provider.read_callback = &GrpcTransport::read_data;
      nghttp2_submit_response(c.session, stream.id, headers.data(), headers.size(), &provider);
    } else {
      nghttp2_session_resume_data(c.session, stream.id);
    }
  }

  // An answer of the transport's own to a stream not handed on (or handed
  // on and now cancelled): the status alone, or an HTTP error.
  void refuse(Connection& c, Stream& stream, int code, std::string_view message) {
    stream.refused = true;
    stream.in.clear();
    if (stream.handed && stream.announced && !stream.finished) c.event(stream.id).cancelled = true;
    if (!stream.finished) queue(c, stream, nullptr, 0, code, message);
  }

  static void refuse_http(Connection& c, Stream& stream, const char* status) {
    stream.refused = true;
    stream.finished = true;
    stream.started = true;
    const nghttp2_nv headers[] = {header(":status", status)};
    nghttp2_submit_response(c.session, stream.id, headers, 1, nullptr);
  }

  // -- nghttp2's callbacks (user_data is the Connection, under its mutex) --------
  static Connection& of(void* user_data) { return *static_cast<Connection*>(user_data); }

  // The event of `stream` in this read, opening the call in Python first
  // where it was not yet.
  static Event& announce(Connection& c, Stream& stream) {
    Event& event = c.event(stream.id);
    event.response = stream.response;
    if (!stream.announced) {
      stream.announced = true;
      event.opened = true;
      event.path = std::move(stream.path);
      event.metadata = std::move(stream.metadata);
    }
    return event;
  }

  static ssize_t read_data(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                           uint32_t* flags, nghttp2_data_source* source, void* user_data) {
    Stream& stream = *static_cast<Stream*>(source->ptr);
    const size_t n = std::min(length, stream.out.size() - stream.out_at);
    std::memcpy(buf, stream.out.data() + stream.out_at, n);
    stream.out_at += n;
    if (stream.out_at < stream.out.size()) return static_cast<ssize_t>(n);
    stream.out.clear();
    stream.out_at = 0;
    if (!stream.finished) return n == 0 ? NGHTTP2_ERR_DEFERRED : static_cast<ssize_t>(n);
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    const std::string status = std::to_string(stream.status);
    std::vector<nghttp2_nv> trailers = {header("grpc-status", status)};
    if (!stream.status_message.empty()) trailers.push_back(header("grpc-message", stream.status_message));
    nghttp2_submit_trailer(session, stream_id, trailers.data(), trailers.size());
    (void)user_data;
    return static_cast<ssize_t>(n);
  }

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    Connection& c = of(user_data);
    auto stream = std::make_unique<Stream>();
    stream->id = frame->hd.stream_id;
    c.streams[stream->id] = std::move(stream);
    return 0;
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name_data, size_t name_length,
                       const uint8_t* value_data, size_t value_length, uint8_t, void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    Stream* stream = of(user_data).stream(frame->hd.stream_id);
    if (stream == nullptr) return 0;
    stream->header_list += name_length + value_length + 32;
    if (stream->header_list > kMaxHeaderList) return 0;  // refused when the headers end
    std::string_view name(reinterpret_cast<const char*>(name_data), name_length);
    std::string_view value(reinterpret_cast<const char*>(value_data), value_length);
    if (name == ":path") {
      stream->path = value;
    } else if (name == ":method") {
      stream->method = value;
    } else if (name == "content-type") {
      stream->content_type = value;
    } else if (name == "grpc-encoding") {
      if (!parse_grpc_encoding(value, &stream->encoding)) stream->encoding_unknown = value;
    } else if (name == "grpc-accept-encoding") {
      stream->accepted |= accepted_encodings(value);
    } else if (name.empty() || name[0] == ':' || name == "te" || name == "grpc-timeout") {
      // HTTP/2's and gRPC's own, not the call's metadata
    } else {
      if (name == "triton_grpc_error" && value == "true") stream->end_at_error = true;
      stream->metadata.emplace_back(name, value);
    }
    return 0;
  }

  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    Connection& c = of(user_data);
    Stream* stream = c.stream(frame->hd.stream_id);
    if (stream == nullptr) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      if (stream->header_list > kMaxHeaderList) {
        stream->metadata.clear();
        c.transport->refuse(c, *stream, kResourceExhausted,
                            "received metadata size exceeds hard limit (" + std::to_string(stream->header_list) +
                                " vs. " + std::to_string(kMaxHeaderList) + ")");
      } else if (stream->method != "POST") {
        refuse_http(c, *stream, "405");
      } else if (stream->content_type.compare(0, 16, "application/grpc") != 0) {
        refuse_http(c, *stream, "415");
      } else if (stream->encoding_unknown) {
        // INTERNAL, as grpc's servers refuse it (the binary resets the
        // stream INTERNAL_ERROR; grpcio's server answers INTERNAL).
        c.transport->refuse(c, *stream, kInternal,
                            "grpc-encoding '" + *stream->encoding_unknown +
                                "' is not an encoding this server decompresses: compress the messages with gzip "
                                "or deflate, or send them uncompressed (it accepts " +
                                std::string(kGrpcAcceptEncoding) + ")");
      } else {
        // A unary call is announced with its message or its end, so that
        // one whose message comes in a later read is handed over whole; a
        // ModelStreamInfer call at once, its RPC starting before any message
        // as on grpc's servers (a restricted protocol refuses it at open).
        stream->handed = true;
        const bool streaming = stream->path == kModelStreamInfer;
        if (stream->path == kModelInfer || streaming) {  // the infer responses
          stream->response = response_encoding(c.transport->compression_level_, stream->accepted);
        }
        stream->native_stream = c.transport->infer_server_ != nullptr && streaming && !stream->end_at_error;
        c.transport->opened_call(c);
        if (streaming) announce(c, *stream);
      }
    }
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0 && stream->handed && !stream->refused) {
      if (!stream->in.empty()) {
        c.transport->refuse(c, *stream, kInternal, "the request's last message is incomplete");
      } else {
        announce(c, *stream).ended = true;
      }
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session* session, uint8_t, int32_t stream_id, const uint8_t* data,
                           size_t length, void* user_data) {
    Connection& c = of(user_data);
    Stream* stream = c.stream(stream_id);
    // The connection's window is given back at once (other streams go on);
    // the stream's once its backlog allows.
    nghttp2_session_consume_connection(session, length);
    if (stream != nullptr && !stream->finished && stream->backlog() >= kStreamBacklog) {
      if (stream->held == 0) c.holding.push_back(stream_id);
      stream->held += length;
    } else {
      nghttp2_session_consume_stream(session, stream_id, length);
    }
    if (stream == nullptr || stream->refused || !stream->handed) return 0;
    GrpcTransport& t = *c.transport;
    stream->in.append(reinterpret_cast<const char*>(data), length);
    size_t at = 0;
    while (stream->in.size() - at >= kPrefix) {
      const auto* p = reinterpret_cast<const unsigned char*>(stream->in.data() + at);
      const uint64_t size = (uint64_t{p[1]} << 24) | (uint64_t{p[2]} << 16) | (uint64_t{p[3]} << 8) | p[4];
      if (p[0] != 0 && stream->encoding == GrpcEncoding::identity) {
        // INTERNAL, as the binary answers it (its servicer cannot parse the
        // message grpc hands it as it came).
        t.refuse(c, *stream, kInternal,
                 "a compressed message on a call without a grpc-encoding: name its algorithm in the call's "
                 "grpc-encoding header (gzip or deflate), or send it uncompressed");
        return 0;
      }
      if (size > t.max_message_) {
        t.refuse(c, *stream, kResourceExhausted,
                 "Received message larger than max (" + std::to_string(size) + " vs. " +
                     std::to_string(t.max_message_) + ")");
        return 0;
      }
      if (stream->in.size() - at - kPrefix < size) break;
      std::string message;
      if (p[0] == 0) {
        message.assign(stream->in, at + kPrefix, size);
      } else if (!t.decompress(c, *stream, stream->in.data() + at + kPrefix, size, &message)) {
        return 0;  // refused
      }
      stream->untaken += kPrefix + message.size();
      Event& event = announce(c, *stream);
      event.messages.push_back(std::move(message));
      event.native_stream = stream->native_stream;
      at += kPrefix + size;
    }
    stream->in.erase(0, at);
    return 0;
  }

  // Under the mutex: a compressed message of `stream` (its grpc-encoding
  // gzip or deflate) decompressed into `message`; false when the call is
  // refused instead: not a whole stream of that encoding (INTERNAL, the
  // binary's words), or larger than the message limit once decompressed
  // (RESOURCE_EXHAUSTED, as the binary; inflated no further than the
  // limit), or no memory for it.
  bool decompress(Connection& c, Stream& stream, const char* data, size_t size, std::string* message) {
    Inflated inflated = Inflated::corrupt;
    try {
      inflated = inflate_message(stream.encoding, data, size, max_message_, message);
    } catch (const std::bad_alloc&) {
      message->clear();
      message->shrink_to_fit();
      refuse(c, stream, kResourceExhausted, "the server has no memory to decompress the message");
      return false;
    }
    if (inflated == Inflated::ok) return true;
    const std::string limit = std::to_string(max_message_);
    if (inflated == Inflated::too_large) {
      refuse(c, stream, kResourceExhausted,
             "Received message larger than max (over " + limit + " once decompressed vs. " + limit + ")");
    } else {
      const std::string name(grpc_encoding_name(stream.encoding));
      refuse(c, stream, kInternal,
             "Unexpected error decompressing data for algorithm " + name + " (the message is not one whole " +
                 name + " stream, as the call's grpc-encoding says)");
    }
    return false;
  }

  static int on_stream_close(nghttp2_session*, int32_t stream_id, uint32_t, void* user_data) {
    Connection& c = of(user_data);
    auto it = c.streams.find(stream_id);
    if (it == c.streams.end()) return 0;
    Stream& stream = *it->second;
    if (stream.handed && !stream.finished) {
      // Reset by the client before its answer: the call is cancelled.
      stream.finished = true;
      c.transport->answered_call(c);
      if (stream.announced) c.event(stream_id).cancelled = true;
      if (stream.cancel) c.cancels.push_back(std::move(stream.cancel));
    }
    for (auto& [key, cancel] : stream.native_requests) {
      if (cancel) c.cancels.push_back(std::move(cancel));
    }
    c.streams.erase(it);
    return 0;
  }

  // Without the GIL: the plan of each message of a ModelStreamInfer event
  // that the native path may serve, up to the first it may not (null from
  // there on: the servicer's).
  std::vector<std::unique_ptr<ModelInferPlan>> plan_stream_messages(const Event& event) {
    std::vector<std::unique_ptr<ModelInferPlan>> plans(event.messages.size());
    for (size_t j = 0; j < event.messages.size(); ++j) {
      try {
        auto plan = std::make_unique<ModelInferPlan>();
        const std::string& message = event.messages[j];
        if (plan_model_infer(reinterpret_cast<const unsigned char*>(message.data()), message.size(), plan.get())) {
          const std::optional<bool> decoupled = model_decoupled(*infer_server_, plan->model_name, plan->model_version);
          if (decoupled) {  // else one the core cannot find: the servicer words it
            plan->decoupled = *decoupled;
            plans[j] = std::move(plan);
          }
        }
      } catch (const std::exception&) {
        // out of memory: the servicer answers
      }
      if (plans[j] == nullptr) break;  // this one and the rest go to the servicer (serve_stream_natively)
    }
    return plans;
  }

  // Under the GIL: serves the messages of `event` natively up to the first
  // one without a plan (or that the native path declines); that one and
  // every later message of the stream go to the servicer, so the core gets
  // them in the order sent (a sequence's state, a one-instance model's
  // answer order), as the servicer submits them one after another.
  void serve_stream_natively(Connection& c, Event& event, std::vector<std::unique_ptr<ModelInferPlan>>& plans) {
    size_t j = 0;
    for (; j < event.messages.size() && plans[j] != nullptr; ++j) {
      bool taken = false;
      try {
        taken = try_stream_infer(c, event.stream, event.response, event.messages[j], *plans[j]);
      } catch (nb::python_error& error) {
        error.discard_as_unraisable(dispatch_);
      } catch (const std::exception&) {
        // nothing submitted: the servicer answers
      }
      if (!taken) break;
    }
    if (j == event.messages.size()) {
      event.messages.clear();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      Stream* stream = c.stream(event.stream);
      if (stream != nullptr) stream->native_stream = false;
    }
    event.messages.erase(event.messages.begin(), event.messages.begin() + static_cast<std::ptrdiff_t>(j));
  }

  // A ModelStreamInfer message (read into `planned`) built and submitted
  // here, under the GIL, its responses written from Triton's thread
  // (StreamSink); false (nothing sent to the core) leaves it to the
  // servicer, as does a stream whose requests or output back up (the
  // servicer's flow then holds the client).
  bool try_stream_infer(Connection& c, int32_t stream_id, GrpcEncoding response, const std::string& message,
                        ModelInferPlan& planned) {
    uint64_t key = 0;
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      Stream* stream = c.stream(stream_id);
      if (c.closed || stream == nullptr || stream->finished || !stream->native_stream ||
          stream->native_requests.size() >= kMaxStreamInFlight || stream->unsent() >= kStreamBacklog) {
        return false;
      }
      key = stream->next_native++;
      stream->native_requests.emplace(key, nullptr);  // in flight from here: the stream's status waits for it
      if (!planned.decoupled) stream->in_order.push_back({key, false, std::nullopt});
    }
    std::function<void()> cancel;
    bool submitted = false;
    try {
      Built built = build_planned(*infer_server_, planned.model_name, planned.model_version, planned.plan,
                                  reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                                  nb::handle());
      if (!built.request.is_none()) {
        Request& request = *nb::inst_ptr<Request>(built.request);
        try {
          request.set_output_memory(TRITONSERVER_MEMORY_CPU, 0);
          request.set_response_sink(std::make_shared<StreamSink>(alive_, c.id, stream_id, key, response, planned,
                                                                 std::move(built.id)));
          request.submit_from_python(nullptr);
          submitted = true;
          cancel = request.canceller();
        } catch (const TritonException&) {
          request.discard_from_python();  // the core refused it: the servicer words the refusal
        } catch (...) {
          request.discard_from_python();
          throw;
        }
      }
    } catch (...) {
      stream_answered(c.id, stream_id, key, nullptr);
      throw;
    }
    if (!submitted) {
      stream_answered(c.id, stream_id, key, nullptr);
      return false;
    }
    native_stream_infers_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(c.mutex);
    Stream* stream = c.stream(stream_id);
    if (stream != nullptr) {
      auto it = stream->native_requests.find(key);
      if (it != stream->native_requests.end()) it->second = std::move(cancel);  // else answered already
      stream->untaken -= std::min(stream->untaken, message.size() + kPrefix);  // taken here, not by the servicer
      if (stream->held != 0) flush(c);
    } else if (!c.closed) {
      c.cancels.push_back(std::move(cancel));  // reset meanwhile: cancelled at the next read or close
    }
    return true;
  }

  // A native stream request's message (if any; `compressed`: in the
  // stream's response encoding) queued, in its request's turn for a model
  // that is not decoupled (Stream::in_order); with `last`, the request
  // ended, and the stream's status is queued once the last one ended after
  // the servicer gave it.
  void stream_answered(uint64_t connection, int32_t stream_id, uint64_t key, const std::string* message,
                       bool last = true, bool compressed = false) {
    std::shared_ptr<Connection> c = std::static_pointer_cast<Connection>(find(connection));
    if (!c) return;
    std::lock_guard<std::mutex> lock(c->mutex);
    Stream* stream = c->stream(stream_id);
    if (c->closed || stream == nullptr) return;
    if (last) stream->native_requests.erase(key);
    if (stream->finished) return;
    auto turn = std::find_if(stream->in_order.begin(), stream->in_order.end(),
                             [key](const Stream::InOrder& entry) { return !entry.answered && entry.key == key; });
    if (turn == stream->in_order.end()) {
      if (message != nullptr) {
        queue(*c, *stream, message->data(), message->size(), std::nullopt, std::string_view(), compressed);
      }
    } else if (turn != stream->in_order.begin()) {
      if (message != nullptr) {  // waits for the answers before it (one message: it answers once)
        turn->message = *message;
        turn->compressed = compressed;
        stream->in_order_bytes += message->size();
      }
      turn->answered = last;
    } else {
      if (message != nullptr) {
        queue(*c, *stream, message->data(), message->size(), std::nullopt, std::string_view(), compressed);
      }
      if (last) {  // the head answered: it and the answered ones after it go
        stream->in_order.pop_front();
        while (!stream->in_order.empty() && stream->in_order.front().answered) {
          const std::optional<std::string>& next = stream->in_order.front().message;
          if (next) {
            stream->in_order_bytes -= next->size();
            queue(*c, *stream, next->data(), next->size(), std::nullopt, std::string_view(),
                  stream->in_order.front().compressed);
          }
          stream->in_order.pop_front();
        }
      }
    }
    if (stream->native_requests.empty() && stream->deferred_status) {
      const auto [code, text] = std::move(*stream->deferred_status);
      stream->deferred_status.reset();
      queue(*c, *stream, nullptr, 0, code, text);
    }
    flush(*c);
  }

  // With the GIL: the error_message text of a native stream request's core error.
  std::string stream_error_text(int error_code, std::string_view message) {
    try {
      return nb::cast<std::string>(stream_error_(error_code, nb::str(message.data(), message.size())));
    } catch (nb::python_error& error) {
      error.discard_as_unraisable(stream_error_);
      return "internal error wording a stream error (reported as unraisable)";
    } catch (const std::exception& error) {
      return std::string("internal error wording a stream error: ") + error.what();
    }
  }

  // A native ModelInfer of `event` (its one message, read into `planned`),
  // under the GIL: built and submitted here, answered from Triton's
  // thread; false (nothing sent to the core) hands it to the servicer.
  bool try_infer(Connection& c, Event& event, ModelInferPlan& planned) {
    const std::string& message = event.messages[0];
    Built built = build_planned(*infer_server_, planned.model_name, planned.model_version, planned.plan,
                                reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                                nb::handle());
    if (built.request.is_none()) return false;  // e.g. unloaded meanwhile: the servicer says so
    Request& request = *nb::inst_ptr<Request>(built.request);
    std::function<void()> cancel;
    try {
      request.set_output_memory(TRITONSERVER_MEMORY_CPU, 0);
      request.set_response_sink(
          std::make_shared<InferSink>(alive_, c.id, event.stream, event.response, planned.model_name,
                                      std::move(built.id)));
      request.submit_from_python(nullptr);
      cancel = request.canceller();
    } catch (const TritonException&) {
      request.discard_from_python();  // the core refused it: the servicer words the refusal
      return false;
    } catch (...) {
      request.discard_from_python();
      throw;
    }
    native_infers_.fetch_add(1, std::memory_order_relaxed);
    // Kept until answered: a client that resets the call or leaves cancels it.
    std::lock_guard<std::mutex> lock(c.mutex);
    Stream* stream = c.stream(event.stream);
    if (stream != nullptr && !stream->finished) {
      stream->cancel = std::move(cancel);
    } else if (stream == nullptr && !c.closed) {
      c.cancels.push_back(std::move(cancel));  // reset meanwhile: cancelled at the next read or close
    }
    return true;
  }

  // The transport as late native infer answers find it (null once destroyed).
  struct Alive {
    explicit Alive(GrpcTransport* t) : transport(t) {}
    std::mutex mutex;
    GrpcTransport* transport;
  };

  // A native ModelInfer's answer (AnswerOnceSink) becomes its gRPC reply.
  class InferSink final : public AnswerOnceSink {
   public:
    InferSink(std::shared_ptr<Alive> alive, uint64_t connection, int32_t stream, GrpcEncoding response,
              std::string model_name, std::string request_id)
        : alive_(std::move(alive)), connection_(connection), stream_(stream), response_(response),
          model_name_(std::move(model_name)), request_id_(std::move(request_id)) {}

   protected:
    void answer(const ResponseData& data) noexcept override {
      // A reply is written here without Python (only alive_->mutex); an
      // error is worded by the servicer.
      int error_code = static_cast<int>(data.error_code);
      std::string_view error_message = data.error_message;
      if (!data.has_error) {
        std::optional<std::string> message;
        try {
          message = infer_response_message(model_name_, request_id_, data);
        } catch (const std::exception& error) {
          respond(nullptr, 0, kInternal, std::string("internal error writing the infer reply: ") + error.what(),
                  false);
          return;
        }
        if (message) {
          std::string packed;  // compressed here, before alive_->mutex, which every native answer takes
          const bool compressed = compress(response_, message->data(), message->size(), &packed);
          const std::string& sent = compressed ? packed : *message;
          respond(sent.data(), sent.size(), 0, std::string_view(), compressed);
          return;
        }
        error_code = TRITONSERVER_ERROR_UNSUPPORTED;  // as the binary refuses such a response
        error_message = kBytesParameterRefused;
      }
      // The GIL before alive_->mutex, as the transport's destructor takes them.
      AnyThreadGil gil;
      std::lock_guard<std::mutex> lock(alive_->mutex);
      if (alive_->transport != nullptr) alive_->transport->infer_error(connection_, stream_, error_code, error_message);
    }

   private:
    // Queues the reply (a message, `compressed` or not, or a status)
    // without Python, if the transport is still there.
    void respond(const char* data, size_t size, int code, std::string_view message, bool compressed) {
      std::lock_guard<std::mutex> lock(alive_->mutex);
      if (alive_->transport != nullptr) {
        alive_->transport->respond(connection_, stream_, data, size, code, message, false, compressed);
      }
    }

    const std::shared_ptr<Alive> alive_;
    const uint64_t connection_;
    const int32_t stream_;
    const GrpcEncoding response_;  // of the call's responses (Stream::response)
    const std::string model_name_, request_id_;
  };

  // A native ModelStreamInfer request's responses become the stream's
  // messages, as the servicer writes them: a model that is not decoupled
  // answers once (the first response with outputs or an error, or the
  // first final one); a decoupled model's every response with outputs, or
  // an error, is one, and its empty final one only when the request asked
  // for it (triton_enable_empty_final_response). Each message carries
  // triton_final_response; the request leaves the stream's count with its
  // final response.
  class StreamSink final : public ResponseSink {
   public:
    StreamSink(std::shared_ptr<Alive> alive, uint64_t connection, int32_t stream, uint64_t key,
               GrpcEncoding response, const ModelInferPlan& planned, std::string request_id)
        : alive_(std::move(alive)), connection_(connection), stream_(stream), key_(key), response_(response),
          model_name_(planned.model_name), model_version_(planned.model_version_text),
          request_id_(std::move(request_id)), decoupled_(planned.decoupled), empty_final_(planned.empty_final) {}

    void take(ResponsePtr response) noexcept override {
      const ResponseData& data = *response;
      if (!decoupled_) {
        if (once_.is_answer(data)) answer(data, true);
        return;
      }
      if (data.cancelled) return;  // the stream is gone: nobody to answer
      if (empty_end(data) && !empty_final_) {
        deliver(nullptr, true);  // the end, with no message of its own
        return;
      }
      answer(data, data.final);
    }

   private:
    // A decoupled model's final response that carries nothing but its flag.
    bool empty_end(const ResponseData& data) const noexcept {
      return decoupled_ && !data.has_error && data.final && data.outputs.empty() && data.parameters.empty();
    }

    // The message of one response; `last`: the request is done with it.
    void answer(const ResponseData& data, bool last) noexcept {
      int error_code = static_cast<int>(data.error_code);
      std::string error_text = data.error_message;
      try {
        if (!data.has_error) {
          if (empty_end(data)) {
            const std::string message = stream_error_message("", request_id_, model_name_, model_version_, true);
            deliver(&message, last);  // the empty final response asked for: the request's names alone
            return;
          }
          std::optional<std::string> inner = infer_response_message(model_name_, request_id_, data);
          if (inner) {
            const std::string message = stream_infer_response_message(std::move(*inner), data.final);
            deliver(&message, last);
            return;
          }
          error_code = TRITONSERVER_ERROR_UNSUPPORTED;  // as the servicer refuses such a response
          error_text = kBytesParameterRefused;
        }
        {
          // Worded by the servicer: the GIL before alive_->mutex, as InferSink takes them.
          AnyThreadGil gil;
          std::lock_guard<std::mutex> lock(alive_->mutex);
          if (alive_->transport == nullptr) return;
          error_text = alive_->transport->stream_error_text(error_code, error_text);
        }
        const std::string message = stream_error_message(error_text, request_id_, model_name_, model_version_,
                                                         data.final);
        deliver(&message, last);
      } catch (const std::exception& error) {
        try {
          const std::string message = stream_error_message(
              std::string("internal error writing a stream response: ") + error.what(), request_id_, model_name_,
              model_version_, true);
          deliver(&message, true);
        } catch (const std::exception&) {
          // out of memory: the stream's client waits until it leaves
        }
      }
    }

    // The message compressed (where the stream's responses are) before
    // alive_->mutex, which every native answer takes, then queued.
    void deliver(const std::string* message, bool last) {
      std::string packed;
      const bool compressed = message != nullptr && compress(response_, message->data(), message->size(), &packed);
      std::lock_guard<std::mutex> lock(alive_->mutex);
      if (alive_->transport != nullptr) {
        alive_->transport->stream_answered(connection_, stream_, key_, compressed ? &packed : message, last,
                                           compressed);
      }
    }

    const std::shared_ptr<Alive> alive_;
    const uint64_t connection_;
    const int32_t stream_;
    const uint64_t key_;
    const GrpcEncoding response_;  // of the stream's responses (Stream::response)
    const std::string model_name_, model_version_, request_id_;
    const bool decoupled_, empty_final_;
    AnswerOnce once_;  // a model that is not decoupled answers once
  };

  const size_t max_message_;
  const int compression_level_;
  nb::object dispatch_, closed_;
  nghttp2_session_callbacks* callbacks_ = nullptr;
  std::shared_ptr<Alive> alive_ = std::make_shared<Alive>(this);
  Server* infer_server_ = nullptr;
  nb::object infer_server_object_, error_, stream_error_;
  std::atomic<uint64_t> native_infers_{0}, native_stream_infers_{0};
};

}  // namespace

void bind_grpc_transport(nb::module_& m) {
  nb::class_<GrpcTransport>(m, "GrpcTransport")
      .def(nb::init<int, int, size_t, int, nb::object, nb::object>(), "listen_fd"_a, "io_threads"_a,
           "max_message"_a, "compression_level"_a, "dispatch"_a, "closed"_a)
      .def_prop_ro("io_threads", [](const GrpcTransport& t) { return t.io_threads(); })
      .def("serve_io", [](GrpcTransport& t, int index) { t.serve_io(index); }, "index"_a,
           nb::call_guard<GilRelease>())
      .def("send", &GrpcTransport::send, "connection"_a, "stream"_a, "message"_a, "in_turn"_a = false)
      .def("backed_up", &GrpcTransport::backed_up, "connection"_a, "stream"_a, nb::call_guard<GilRelease>())
      .def("taken", &GrpcTransport::taken, "connection"_a, "stream"_a, "size"_a, nb::call_guard<GilRelease>())
      .def("finish", &GrpcTransport::finish, "connection"_a, "stream"_a, "code"_a, "message"_a)
      .def("reply", &GrpcTransport::reply, "connection"_a, "stream"_a, "message"_a)
      .def("enable_infer", &GrpcTransport::enable_infer, "server"_a, "error"_a, "stream_error"_a)
      .def_prop_ro("native_infers", &GrpcTransport::native_infers)
      .def_prop_ro("native_stream_infers", &GrpcTransport::native_stream_infers)
      .def("stop", [](GrpcTransport& t, double grace_s) { return t.stop(grace_s); }, "grace_s"_a,
           nb::call_guard<GilRelease>())
      .def("close_all", [](GrpcTransport& t) { t.close_all(); });
}

}  // namespace tsb
