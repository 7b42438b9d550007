// Calling back into Python from a native transport's I/O thread (a thread
// Python started, running without the GIL): cpp/http_transport.cc,
// cpp/grpc_transport.cc.
#pragma once

#include <nanobind/nanobind.h>

#include <utility>

#include "thread_state.h"

namespace tsb {

// Calls `fn(args...)` holding the GIL for the call. A Python exception it
// raises is reported as unraisable, with `fn` named as its context: the
// I/O thread goes on serving.
template <typename... Args>
void call_reporting(const nanobind::object& fn, Args&&... args) {
  GilAcquire gil;
  try {
    fn(std::forward<Args>(args)...);
  } catch (nanobind::python_error& error) {
    error.discard_as_unraisable(fn);
  }
}

}  // namespace tsb
