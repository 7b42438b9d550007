// gRPC's message compression for the native gRPC transport
// (cpp/grpc_transport.cc), as grpc's own servers (NVIDIA's binary among
// them) do it: a message whose prefix's compressed flag is set is in the
// call's grpc-encoding, gzip or deflate (zlib's format), both by zlib
// (cpp/zlib.cmake); infer responses are compressed at a level (the binary's
// --grpc-infer-response-compression-level) with an algorithm the client
// accepts (its grpc-accept-encoding).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tsb {

enum class GrpcEncoding { identity, deflate, gzip };

// What the transport accepts, as grpc's servers say it (the binary's
// grpc-accept-encoding response header).
inline constexpr std::string_view kGrpcAcceptEncoding = "identity, deflate, gzip";

// The encoding a grpc-encoding header names; false when it is none of the three.
bool parse_grpc_encoding(std::string_view name, GrpcEncoding* encoding);

// An encoding's grpc-encoding name.
std::string_view grpc_encoding_name(GrpcEncoding encoding);

// The compressing encodings a grpc-accept-encoding header names (a list
// separated by commas), as a set of bits (1 << GrpcEncoding); several such
// headers give the union of their sets.
unsigned accepted_encodings(std::string_view value);

// The encoding of infer responses at a compression level (1 LOW, 2 MED,
// 3 HIGH; 0 NONE: identity) for a client that accepts `accepted`: as
// grpc's servers choose it, of gzip then deflate, those the client
// accepts: LOW the first, MED the middle one, HIGH the last; identity
// when it accepts neither (a client without grpc-accept-encoding).
GrpcEncoding response_encoding(int level, unsigned accepted);

enum class Inflated { ok, corrupt, too_large };

// A compressed message (`encoding` gzip or deflate) decompressed into
// `out`; too_large as soon as it grows past `max_size` bytes, so that a
// small message that inflates to gigabytes (a decompression bomb) is
// refused without being inflated further; corrupt when it is not a whole
// stream of its encoding. Throws std::bad_alloc when out of memory.
Inflated inflate_message(GrpcEncoding encoding, const char* data, size_t size, size_t max_size, std::string* out);

// A message compressed with `encoding` (gzip or deflate) at zlib's default
// level, as grpc compresses; false (and `out` unspecified) when that is
// not smaller than the message, which then goes uncompressed, as grpc's
// servers send it. Throws std::bad_alloc when out of memory.
bool deflate_message(GrpcEncoding encoding, const char* data, size_t size, std::string* out);

}  // namespace tsb
