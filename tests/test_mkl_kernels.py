"""training.mkl_kernels: MKL's vendor check made to answer "Intel" on an AMD CPU, and nothing touched elsewhere."""

from types import SimpleNamespace

import pytest
import torch

import vanilla_transformer.training.mkl_kernels as mkl_kernels
import vanilla_transformer.training.train as train

from .helpers import run_python

CPUINFO = """processor\t: 0
vendor_id\t: {vendor}
cpu family\t: 25
flags\t\t: fpu sse sse2 {flags}

processor\t: 1
vendor_id\t: {vendor}
flags\t\t: fpu sse sse2 {flags}
"""


def test_the_cpus_vendor_and_flags_are_read_from_proc_cpuinfo():
    vendor, flags = mkl_kernels.cpu_vendor_and_flags(CPUINFO.format(vendor="AuthenticAMD", flags="avx avx2 fma"))
    assert vendor == "AuthenticAMD" and {"avx2", "fma", "sse2"} <= flags
    assert mkl_kernels.cpu_vendor_and_flags(CPUINFO.format(vendor="GenuineIntel", flags=""))[1] == {
        "fpu",
        "sse",
        "sse2",
    }
    assert mkl_kernels.cpu_vendor_and_flags("") == ("", set())


@pytest.mark.parametrize(("vendor", "flags"), [("GenuineIntel", "avx avx2"), ("AuthenticAMD", "avx"), ("", "")])
def test_only_an_amd_cpu_with_avx2_is_taken_for_one(monkeypatch, vendor, flags):
    monkeypatch.setattr(mkl_kernels.platform, "system", lambda: "Linux")
    monkeypatch.setattr(mkl_kernels.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(mkl_kernels.Path, "read_text", lambda self, **_: CPUINFO.format(vendor=vendor, flags=flags))
    assert not mkl_kernels.amd_cpu_with_avx2()
    monkeypatch.setattr(
        mkl_kernels.Path, "read_text", lambda self, **_: CPUINFO.format(vendor="AuthenticAMD", flags="avx2")
    )
    assert mkl_kernels.amd_cpu_with_avx2()
    monkeypatch.setattr(mkl_kernels.platform, "machine", lambda: "aarch64")
    assert not mkl_kernels.amd_cpu_with_avx2()


def test_no_code_is_written_where_the_cpu_is_not_amds_or_torch_has_no_such_check(monkeypatch):
    def refuse(*_):
        raise AssertionError("code written")

    monkeypatch.setattr(mkl_kernels, "overwrite_code", refuse)
    monkeypatch.setattr(mkl_kernels, "amd_cpu_with_avx2", lambda: False)
    assert mkl_kernels.use_mkl_intel_kernels() is False
    monkeypatch.setattr(mkl_kernels, "amd_cpu_with_avx2", lambda: True)
    monkeypatch.setattr(mkl_kernels, "vendor_check", lambda: None)
    assert mkl_kernels.use_mkl_intel_kernels() is False
    monkeypatch.setattr(mkl_kernels, "vendor_check", lambda: lambda: 1)  # an Intel CPU's answer: nothing to change
    assert mkl_kernels.use_mkl_intel_kernels() is True


def test_vt_train_asks_for_the_kernels_first_unless_told_not_to(monkeypatch):
    calls = []
    monkeypatch.setattr(train, "use_mkl_intel_kernels", lambda: calls.append("asked") or False)
    monkeypatch.setattr(torch, "set_flush_denormal", lambda mode: True)  # this process's floats stay as they are
    settings = dict(reuse_freed_memory=False, flush_denormal=True)
    train.configure_process(SimpleNamespace(mkl_intel_kernels=False, **settings))
    assert calls == []
    train.configure_process(SimpleNamespace(mkl_intel_kernels=True, **settings))
    assert calls == ["asked"]


# In a new Python, before its first matrix product (where MKL makes its choice): the check's answer before and after
# "return 1" is written over it, and products of the model's shapes against float64's.
OVERWRITTEN_CHECK = """
import torch
from vanilla_transformer.training import mkl_kernels
check = mkl_kernels.vendor_check()
before = check()
address = mkl_kernels.ctypes.cast(check, mkl_kernels.ctypes.c_void_p).value
written = mkl_kernels.overwrite_code(address, mkl_kernels.RETURN_ONE)
after = check()
used = mkl_kernels.use_mkl_intel_kernels()
torch.manual_seed(0)
for m, k, n in [(256, 128, 8000), (1020, 128, 128), (1020, 256, 128), (37, 5, 3)]:
    a, b = torch.randn(m, k), torch.randn(n, k)
    for product, exact in [(a @ b.t(), a.double() @ b.double().t()), (b.t() @ b, b.double().t() @ b.double())]:
        torch.testing.assert_close(product.double(), exact, rtol=1e-4, atol=1e-4 * k)
print(before, written, after, used, mkl_kernels.amd_cpu_with_avx2())
"""


@pytest.mark.skipif(mkl_kernels.vendor_check() is None, reason="a torch without MKL's vendor check (not x86 Linux)")
def test_the_check_answers_intel_after_the_write_and_the_products_stay_right(tmp_path):
    result = run_python(OVERWRITTEN_CHECK, tmp_path, without=())
    before, written, after, used, amd = result.stdout.split()
    assert written == "True" and after == "1"
    assert used == amd  # on an AMD CPU with AVX2 the remedy holds; elsewhere it is not applied
    if amd == "True":  # MKL's own answer on an AMD CPU, which the write changed
        assert before == "0"
