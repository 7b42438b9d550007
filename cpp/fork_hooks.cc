#include "fork_hooks.h"

#include <pthread.h>

#include "deferred_release.h"
#include "fork.h"
#include "thread_state.h"
#include "server.h"
#include "spin_wait.h"

namespace tsb {
namespace {

void before_fork() { deferred_release_before_fork(); }

void after_fork_in_parent() { deferred_release_after_fork_in_parent(); }

// In order: the generation first (what a child inherited is told apart by
// it), then the states the parent's threads may have left locked or busy.
void after_fork_in_child() {
  fork_after_fork_in_child();
  spin_wait_after_fork_in_child();
  deferred_release_after_fork_in_child();
  state_maker_after_fork_in_child();
  server_after_fork_in_child();
}

}  // namespace

void install_fork_hooks() noexcept {
  static const bool installed [[maybe_unused]] =
      pthread_atfork(before_fork, after_fork_in_parent,
                     after_fork_in_child) == 0;
}

}  // namespace tsb
