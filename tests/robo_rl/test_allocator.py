"""glibc malloc keeps the memory a thread frees for its next allocations (robo_rl.allocator)."""

import subprocess
import sys
import textwrap

import pytest

# A thread allocates 40 buffers of 256 KB (a compiled update's intermediates), touches and frees them, 50
# times; prints the page faults of those 50 rounds.
_ROUNDS = textwrap.dedent("""
    import resource, sys, threading
    import torch
    from robo_rl.allocator import keep_freed_memory
    if sys.argv[1] == "keep" and not keep_freed_memory():
        sys.exit(3)
    faults = []
    def rounds():
        for i in range(60):
            if i == 10:
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            buffers = [torch.empty(65536).fill_(1.0) for _ in range(40)]
            del buffers
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    thread = threading.Thread(target=rounds)
    thread.start()
    thread.join()
    print(faults[0])
""")


def _page_faults(mode: str) -> int:
    run = subprocess.run([sys.executable, "-c", _ROUNDS, mode], capture_output=True, text=True)
    if run.returncode == 3:
        pytest.skip("the C library is not glibc")
    assert run.returncode == 0, run.stderr
    return int(run.stdout.strip())


def test_freed_buffers_are_reused_without_page_faults():
    kept = _page_faults("keep")
    default = _page_faults("default")
    # glibc's defaults return the freed memory to the OS and fault it back in (46,404 faults here)
    assert default > 10_000 and kept < 500, (default, kept)
