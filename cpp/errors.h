// Errors crossing from the Triton core (or our own checks) into Python.
// A TritonException carries the core's error code; translate_exception()
// (registered by module.cc) raises it as the matching tritonserver.*Error
// class.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

#include "triton_api.h"

namespace tsb {

class TritonException : public std::runtime_error {
 public:
  TritonException(TRITONSERVER_Error_Code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  TRITONSERVER_Error_Code code() const noexcept { return code_; }

 private:
  TRITONSERVER_Error_Code code_;
};

// The core's message of `err`, without the "[request id: <id_unknown>] "
// the core puts before its errors about a request that has no id (an id the
// user set is kept). Every core message that reaches Python passes here.
std::string core_message(const TritonApi& api, TRITONSERVER_Error* err);

// Throws (and deletes `err`) when `err` is not null. `context` is prepended
// to the core's message when given.
void check(TRITONSERVER_Error* err, const char* context = nullptr);

// Deletes `err` (null is fine): for a clean-up call whose failure has
// nobody to be reported to. Never throws.
void ignore_error(TRITONSERVER_Error* err) noexcept;

// Makes a TRITONSERVER_Error for returning from a C callback. Never throws.
TRITONSERVER_Error* make_error(TRITONSERVER_Error_Code code,
                               const char* message) noexcept;

// nanobind's exception translator for TritonException: the class is
// tritonserver._api._errors._BY_CODE[code], looked up (with the GIL, on the
// first error) from Python's own table; RuntimeError for a code past it.
void translate_exception(const std::exception_ptr& exception, void*);

// Inside a catch block of a raw type slot (which nanobind does not wrap):
// the exception being handled set as the Python error nanobind would raise
// for it (error_classes.cc).
void set_error_from_current_exception() noexcept;

[[noreturn]] inline void raise(TRITONSERVER_Error_Code code,
                               const std::string& message) {
  throw TritonException(code, message);
}

}  // namespace tsb
