"""Memory a training (or decoding) step frees, kept for the next step instead of given back to the system (glibc's
malloc).

A training step allocates and frees the same large buffers every time (the logits alone are tokens x vocabulary
floats, and their gradient, softmax and dropout masks as many again). glibc's malloc serves each allocation over
32 MB with its own mmap, returns it with munmap when freed, and trims the top of its heap whenever that much is free
there, so that every step the kernel maps and zeroes the same pages anew. With mmap and trimming off, freed memory
stays in malloc's heap and the next step reuses it; the cost is memory, the largest step's staying reserved until
the process ends. Decoding is the same on a smaller scale (tensors of the vocabulary's size at every step), and
vt-translate keeps them too. benchmarks/README.md has the page faults, step times and memory measured.

`MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=...` in the environment does the same, but only when set before Python
starts; mallopt() changes it from inside the process, for every allocation after the call. No allocator library
does this for a running process (jemalloc and tcmalloc must be preloaded), so it is written here.
"""

import ctypes
import ctypes.util
import platform

# mallopt() parameters, from glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
NEVER_TRIM = 2**31 - 1  # mallopt takes an int: the largest, ~2 GB of free heap top before any is given back


def reuse_freed_memory() -> bool:
    """Turn off glibc malloc's mmap for large blocks and its heap trimming, for the rest of this process. True where
    that was done; False where the C library is not glibc (macOS, Windows, musl), which is left as it is."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, NEVER_TRIM))
