#include "grpc_compression.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <new>

namespace tsb {
namespace {

// zlib's window bits: 15 (its largest window) for the zlib format grpc
// calls deflate, plus 16 for the gzip format.
int window_bits(GrpcEncoding encoding) { return encoding == GrpcEncoding::gzip ? 15 + 16 : 15; }

// As much of `left` bytes as one zlib call takes (its counts are unsigned int).
unsigned int chunk(size_t left) { return static_cast<unsigned int>(std::min<size_t>(left, UINT_MAX)); }

// A z_stream set up for inflating or deflating, ended when it goes.
class ZStream {
 public:
  explicit ZStream(bool inflating) : inflating_(inflating) {}
  ZStream(const ZStream&) = delete;
  ZStream& operator=(const ZStream&) = delete;
  ~ZStream() {
    if (!ready_) return;
    if (inflating_) {
      inflateEnd(&z_);
    } else {
      deflateEnd(&z_);
    }
  }

  // After inflateInit2 or deflateInit2 returned `rc`: out of memory
  // throws; true when the stream is ready.
  bool started(int rc) {
    if (rc == Z_MEM_ERROR) throw std::bad_alloc();
    ready_ = rc == Z_OK;
    return ready_;
  }

  z_stream* get() { return &z_; }

 private:
  z_stream z_{};
  const bool inflating_;
  bool ready_ = false;
};

// Trims spaces and tabs around a list element.
std::string_view trimmed(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

}  // namespace

bool parse_grpc_encoding(std::string_view name, GrpcEncoding* encoding) {
  if (name == "identity") {
    *encoding = GrpcEncoding::identity;
  } else if (name == "gzip") {
    *encoding = GrpcEncoding::gzip;
  } else if (name == "deflate") {
    *encoding = GrpcEncoding::deflate;
  } else {
    return false;
  }
  return true;
}

std::string_view grpc_encoding_name(GrpcEncoding encoding) {
  switch (encoding) {
    case GrpcEncoding::gzip:
      return "gzip";
    case GrpcEncoding::deflate:
      return "deflate";
    case GrpcEncoding::identity:
      break;
  }
  return "identity";
}

unsigned accepted_encodings(std::string_view value) {
  unsigned accepted = 0;
  while (!value.empty()) {
    const size_t comma = value.find(',');
    GrpcEncoding encoding;
    if (parse_grpc_encoding(trimmed(value.substr(0, comma)), &encoding)) {
      accepted |= 1u << static_cast<unsigned>(encoding);
    }
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return accepted;
}

GrpcEncoding response_encoding(int level, unsigned accepted) {
  GrpcEncoding ranked[2];
  size_t count = 0;
  for (GrpcEncoding encoding : {GrpcEncoding::gzip, GrpcEncoding::deflate}) {
    if ((accepted & (1u << static_cast<unsigned>(encoding))) != 0) ranked[count++] = encoding;
  }
  if (level <= 0 || count == 0) return GrpcEncoding::identity;
  if (level == 1) return ranked[0];
  if (level == 2) return ranked[count / 2];
  return ranked[count - 1];
}

Inflated inflate_message(GrpcEncoding encoding, const char* data, size_t size, size_t max_size, std::string* out) {
  ZStream stream(true);
  if (!stream.started(inflateInit2(stream.get(), window_bits(encoding)))) return Inflated::corrupt;
  z_stream& z = *stream.get();
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  size_t in_left = size;
  // The output grows as it fills, to one byte past max_size at most (the
  // byte that tells it is too large).
  const size_t limit = max_size == SIZE_MAX ? max_size : max_size + 1;
  size_t produced = 0;
  out->clear();
  for (;;) {
    if (z.avail_in == 0 && in_left != 0) {
      z.avail_in = chunk(in_left);
      in_left -= z.avail_in;
    }
    if (produced == out->size()) {
      if (produced == limit) return Inflated::too_large;
      out->resize(std::min(limit, std::max<size_t>(produced * 2, std::max<size_t>(size * 2, 4096))));
    }
    z.next_out = reinterpret_cast<Bytef*>(&(*out)[produced]);
    z.avail_out = chunk(out->size() - produced);
    const unsigned int room = z.avail_out;
    const int rc = inflate(&z, Z_NO_FLUSH);
    produced += room - z.avail_out;
    if (rc == Z_STREAM_END) {
      if (produced > max_size) return Inflated::too_large;
      if (z.avail_in != 0 || in_left != 0) return Inflated::corrupt;  // bytes after the stream's end
      out->resize(produced);
      return Inflated::ok;
    }
    if (rc == Z_MEM_ERROR) throw std::bad_alloc();
    if (rc == Z_BUF_ERROR && z.avail_out != 0) return Inflated::corrupt;  // its input ended before the stream
    if (rc != Z_OK && rc != Z_BUF_ERROR) return Inflated::corrupt;  // Z_DATA_ERROR, Z_NEED_DICT
  }
}

bool deflate_message(GrpcEncoding encoding, const char* data, size_t size, std::string* out) {
  if (size < 2) return false;
  ZStream stream(false);
  if (!stream.started(deflateInit2(stream.get(), Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits(encoding), 8,
                                   Z_DEFAULT_STRATEGY))) {
    return false;
  }
  z_stream& z = *stream.get();
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  size_t in_left = size;
  // Room for what is smaller than the message, no more: a deflate that
  // does not end within it does not pay.
  out->resize(size - 1);
  z.next_out = reinterpret_cast<Bytef*>(&(*out)[0]);
  size_t out_left = out->size();
  for (;;) {
    if (z.avail_in == 0 && in_left != 0) {
      z.avail_in = chunk(in_left);
      in_left -= z.avail_in;
    }
    if (z.avail_out == 0) {
      if (out_left == 0) return false;
      z.avail_out = chunk(out_left);
      out_left -= z.avail_out;
    }
    const int rc = deflate(&z, in_left == 0 ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      out->resize(z.total_out);
      return true;
    }
    if (rc == Z_MEM_ERROR) throw std::bad_alloc();
    if (rc != Z_OK && rc != Z_BUF_ERROR) return false;
  }
}

}  // namespace tsb
