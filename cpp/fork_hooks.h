// The package's fork() hooks, registered once, here: what each native part
// does around a fork() (fork.h says what a child may do with what it
// inherited). Python's own after-fork hook (os.register_at_fork, in
// _api/_server.py) adds fork.h's end_child_at_exit for children of
// os.fork().
#pragma once

namespace tsb {

// Registers the hooks with pthread_atfork (once per process; the module
// calls it when it is imported).
void install_fork_hooks() noexcept;

}  // namespace tsb
