"""Keep freed CPU memory in the process heap between training steps (Linux with glibc).

Why this exists: glibc hands every allocation above its mmap threshold (128 KiB,
rising on its own to at most 32 MiB) a fresh ``mmap`` and gives it back with
``munmap`` when freed, and trims the top of the heap back to the OS. A training
step allocates and frees the same activation-sized buffers every step, so with
those defaults every step page-faults all of them in again and the kernel zeroes
each page first. Measured on the 2-core CI machine (benchmarks/train_throughput.py,
docs/training.md): ~40,000 minor page faults per tiny-1m step and 15-30 % of its
time; with the thresholds raised, ~0 faults per step. Peak memory does not grow
(the same buffers are reused); it is just not returned to the OS between steps.

The setting is process-wide and stays for the life of the process; it changes no
result, only where freed memory goes. Train config ``cpu_heap: system`` skips it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

# mallopt parameter numbers from glibc's <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_applied = False


def retain_freed_memory(threshold: int = 1 << 30) -> bool:
    """Serve allocations up to ``threshold`` bytes from the heap and never trim it below that.

    Returns True when the setting is in force (now or from an earlier call),
    False where it does not apply (not glibc, e.g. macOS, Windows, musl).
    """
    global _applied
    if _applied:
        return True
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return False
    # both are needed: a high mmap threshold alone still trims the freed top of the
    # heap back to the OS; a high trim threshold alone leaves large buffers on mmap
    _applied = bool(libc.mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, threshold))
    return _applied
