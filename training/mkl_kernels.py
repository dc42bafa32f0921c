"""MKL's fast kernels on an AMD CPU (`--mkl_intel_kernels`).

torch's x86 builds do their float32 matrix products with Intel's MKL, which picks its kernels by asking one function,
`mkl_serv_intel_cpu_true()`, whether the CPU is Intel's (its vendor string "GenuineIntel"). On an AMD CPU the answer
is 0, and MKL runs generic kernels, slower on this model's products, though the CPU has the same AVX2 instructions
(AVX-512 on Zen 4) as the Intel CPUs whose kernels it keeps back. Replacing that one function so that it answers 1
is the known remedy (D. de Kok, "Intel MKL on AMD Zen", 2020; the Sigma2 HPC documentation), done there by preloading
a compiled library before the program starts. torch links MKL into `libtorch_cpu.so`, where the function is exported,
so this module writes `return 1` over its first instructions in the running process instead: no compiler, no
preloading, no file changed. MKL then still chooses among its Intel kernels by the CPU's instruction sets. MKL
remembers its choice at the first matrix product, so this must run before it (vt-train and vt-translate do so
first). docs/training.md and docs/experiments.md (issue 41, forty-first part) have the measured speed.

Only where it is known to apply: Linux on x86-64, an AMD CPU with AVX2, a torch built with MKL that exports the
function. Anywhere else, or where the system refuses to make the code page writable, nothing changes.
"""

import ctypes
import mmap
import platform
from collections.abc import Callable
from pathlib import Path

import torch

VENDOR_CHECK = "mkl_serv_intel_cpu_true"
RETURN_ONE = b"\xb8\x01\x00\x00\x00\xc3"  # x86-64: mov eax, 1; ret


def cpu_vendor_and_flags(cpuinfo: str) -> tuple[str, set[str]]:
    """The first processor's vendor ("AuthenticAMD", "GenuineIntel", ...) and instruction-set flags in the text of
    Linux's /proc/cpuinfo; ("", set()) where it names none."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    return fields.get("vendor_id", ""), set(fields.get("flags", "").split())


def amd_cpu_with_avx2() -> bool:
    """Whether this is Linux on an x86-64 AMD CPU with AVX2, the kind of machine the remedy was measured on."""
    if platform.system() != "Linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    vendor, flags = cpu_vendor_and_flags(Path("/proc/cpuinfo").read_text(errors="replace"))
    return vendor == "AuthenticAMD" and "avx2" in flags


def vendor_check() -> Callable[[], int] | None:
    """MKL's vendor check as linked into this torch (a function of no arguments returning an int), or None where
    torch has no MKL or does not export it."""
    library = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    if not torch.backends.mkl.is_available() or not library.is_file():
        return None
    try:
        function = getattr(ctypes.CDLL(str(library)), VENDOR_CHECK)
    except (OSError, AttributeError):
        return None
    function.restype, function.argtypes = ctypes.c_int, []
    return function


def overwrite_code(address: int, code: bytes) -> bool:
    """Write `code` at `address` in this process's executable memory: its pages made writable for the write, then
    readable and executable again. False, and nothing written, where the system refuses (SELinux's execmod, PaX)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes, libc.mprotect.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
    start = address - address % mmap.PAGESIZE
    length = address + len(code) - start  # the code may cross into the next page
    if libc.mprotect(start, length, mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC) != 0:
        return False
    ctypes.memmove(address, code, len(code))
    libc.mprotect(start, length, mmap.PROT_READ | mmap.PROT_EXEC)
    return True


def use_mkl_intel_kernels() -> bool:
    """On an AMD CPU with AVX2, make MKL's vendor check answer "Intel" for the rest of this process, so that its
    matrix products run its AVX2 (or AVX-512) kernels. True where MKL's check now answers so; False where this is not
    such a machine or torch, or the code could not be written, and nothing was changed."""
    if not amd_cpu_with_avx2() or (check := vendor_check()) is None:
        return False
    if check() != 1 and not overwrite_code(ctypes.cast(check, ctypes.c_void_p).value, RETURN_ONE):
        return False
    return check() == 1
