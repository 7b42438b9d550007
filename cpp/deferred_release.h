// The one path by which Python references are dropped from threads that do
// not hold the GIL (Triton's callback threads): they are parked here and
// released the next time Python code calls into the core.
#pragma once

#include <nanobind/nanobind.h>

#include <vector>

namespace tsb {

// Takes ownership of `objects` without touching their reference counts.
void defer_release(std::vector<nanobind::object>&& objects) noexcept;

// Drops every parked reference. Call with the GIL held.
void drain_deferred();

}  // namespace tsb
