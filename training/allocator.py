"""Memory a training (or decoding) step frees, kept for the next step instead of given back to the system (glibc's
malloc).

A training step allocates and frees the same large buffers every time: the logits alone are tokens x vocabulary
floats (4,096 x 8,000 x 4 bytes = 131 MB for Multi30K), and their gradient, softmax and dropout masks as many
again. glibc's malloc serves each allocation over 32 MB with its own mmap and returns it with munmap when freed, and
trims the top of its heap whenever that much is free there, so every step the kernel maps and zeroes the same pages
anew. On 2 cores of an AMD EPYC (the Multi30K Tiny model, token-budget batches of 4,096) that was 170,000 page faults
and 0.35-0.46 s of kernel time per step. With mmap and trimming off, freed memory stays in malloc's heap and the
next step reuses it: about 1,000 page faults and 0.01 s of kernel time per step, and the shipped config's steps took
0.59 s instead of 0.80-0.85 s (benchmarks/README.md). The cost is memory: the largest step's stays reserved until
the process ends, and the first steps leave holes in the heap that later blocks fit into (peak resident memory
1.35 GB -> 1.64 GB there).

Decoding is the same on a smaller scale: every generate() step allocates and frees tensors of the vocabulary's size
(batch x beams x 8,000 floats). vt-translate (tools.translate) keeps them too: 500 Multi30K sentences in batches of
32 with beam 4 made ~7,000 page faults instead of ~430,000 and ran 1.1x faster, with the same peak memory.

`MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=...` in the environment does the same, but only when set before Python
starts; mallopt() changes it from inside the process, for every allocation after the call. No allocator library
does this for a running process (jemalloc and tcmalloc must be preloaded, and jemalloc's defaults fault as often:
0.96 s per step in the measurement above), so it is written here.
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
