// Routing the core's log lines to a Python callable, on cores that have
// TRITONSERVER_ServerOptionsSetLogCallback (newer than 2.51).
#pragma once

#include <nanobind/nanobind.h>

#include "server.h"

namespace tsb {

// Throws UNSUPPORTED (naming what is needed) when the core lacks the hook.
void install_log_callback(ServerOptions& options, nanobind::callable fn);

}  // namespace tsb
