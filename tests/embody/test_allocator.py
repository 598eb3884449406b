"""The allocator tuning: on glibc, a training step's large temporaries stop faulting fresh pages in."""

import platform
import subprocess
import sys

import pytest

PROBE = """
import resource, torch
from embody.allocator import keep_freed_memory

def faults():
    start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):
        a = torch.ones(512, 512)  # 1 MB, above glibc's default mmap threshold
        b = a * 2 + 1  # and its temporaries
        del a, b
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start

before = faults()
applied = keep_freed_memory()
faults()  # the heap grows to hold them once
print(applied, before, faults())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's thresholds are glibc's")
def test_keep_freed_memory_stops_page_faults_on_large_temporaries():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.split()
    applied, before, after = out[0] == "True", int(out[1]), int(out[2])
    assert applied
    assert before > 1000 and after < before / 10, (before, after)  # fresh pages on every step before, none after
