"""Keep freed memory in the process, so that the machine model's arrays reuse pages.

A program allocates a new array for most op results, every call. glibc serves blocks of
128 KiB and more with a fresh `mmap` and unmaps them on free (its threshold adapts only
up to the first large free), so each call's arrays start as untouched pages whose first
write is a page fault that the kernel answers with a zeroed page. On the 2-core
development VM that was half of a transformer layer's inference time at batch 256
(measured with bench/run.py: 122 -> 66 ms a call, matmuls 57 -> 32 ms), since every
16 MiB result paid 4,096 faults.

`keep_freed_memory()` asks glibc (mallopt) to serve such blocks from its heap and to keep
the heap's freed top instead of returning it to the system: later calls reuse pages that
are already mapped. The cost is that the process's resident size stays at its peak. It
is process-wide, done once, on glibc only, when the first program is compiled; the
environment variable POPTORCH_KEEP_FREED_MEMORY=0 turns it off.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform

from poptorch._logging import logger

VARIABLE = "POPTORCH_KEEP_FREED_MEMORY"
# mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks up to 1 GiB come from the heap; freed heap top up to 2 GiB stays mapped.
_MMAP_THRESHOLD = 1 << 30
_TRIM_THRESHOLD = (1 << 31) - 1

@functools.cache
def keep_freed_memory() -> bool:
    """Tune glibc's allocator once (see the module's docstring); True if it is tuned."""
    if os.environ.get(VARIABLE, "1") == "0" or platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt
    tuned = bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
    logger.debug("glibc keeps freed memory for reuse: %s", tuned)
    return tuned
