"""The C allocator tuned for torch on CPU: freed blocks stay with the process.

glibc's malloc serves blocks above its mmap threshold (128 KB to start) with fresh ``mmap`` pages and trims the
heap top above its trim threshold, so a training step's large temporaries — a 256-wide layer's activations for a
batch of 256 are 256 KB — come back as zero pages that fault in, one 4 KB page at a time, on every step. Measured
on SAC's update (256×256 twin critics, batch 256, one thread): ~500 minor page faults per gradient step and 8 %
of its time; with the thresholds below, under one. The PyTorch CPU tuning guide's remedy is jemalloc or tcmalloc
preloaded; ``mallopt`` gets the same effect from inside the process, at the price of up to 256 MB of freed
memory the process keeps. PPO's H1-2 training faults as often either way (its faults are not these). A no-op
off glibc.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 * 2**20  # glibc's largest: blocks below it come from the heap
TRIM_THRESHOLD = 256 * 2**20  # free heap kept before returning memory to the system


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process; whether it applied (False off glibc)."""
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols: no library search (find_library runs ldconfig)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 - glibc only: musl and macOS lack it
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
