// Reuse of large host blocks. Fresh pages cost a page fault (and zeroing by
// the kernel) on first touch; malloc returns large blocks to the OS, so
// every large output would pay that again. Blocks of 1 MiB and more are kept
// here, by size class, up to a bounded total, and handed out again.
#pragma once

#include <cstddef>

namespace tsb {

// At least `size` bytes, 64-byte aligned; `*capacity` receives the block's
// real size, to be passed back to host_free. Null on failure.
void* host_alloc(size_t size, size_t* capacity) noexcept;
void host_free(void* block, size_t capacity) noexcept;

// Bytes held for reuse (not in use by any buffer).
size_t host_pool_cached_bytes() noexcept;
// Returns every cached block to the system (free()). Buffers in use are not
// affected. Server.stop() calls it.
void host_pool_trim() noexcept;

}  // namespace tsb
