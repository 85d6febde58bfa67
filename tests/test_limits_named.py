"""Limits on measured runs (issue 31): the limit a failed run hit is named in its reason, with its setting."""

from __future__ import annotations

import pytest

from orchard.limits import Limits

LIMITS = Limits(memory_mb=128, processes=64, cpu_s=5, file_mb=1)


@pytest.mark.parametrize(("exit_code", "stderr", "said"), [
    (1, "Traceback ...\nMemoryError\n", " (over its memory limit while measured, memory_mb = 128)"),
    (134, "terminate called after throwing an instance of 'std::bad_alloc'", " (over its memory limit while measured,"
                                                                             " memory_mb = 128)"),
    (1, "  pid = os.fork()\nBlockingIOError: [Errno 11] Resource temporarily unavailable",
     " (over its process limit while measured, processes = 64)"),
    (254, "sh: 1: Cannot fork", " (over its process limit while measured, processes = 64)"),
    (153, "", " (over its file-size limit while measured, file_mb = 1)"),
    (1, "OSError: [Errno 27] File too large", " (over its file-size limit while measured, file_mb = 1)"),
    (152, "", " (over its CPU time limit while measured, cpu_seconds = 5)"),
    (1, "grep: no such pattern", ""),
    (0, "MemoryError", ""),
])
def test_a_run_that_hit_a_limit_names_it_and_its_setting(exit_code: int, stderr: str, said: str) -> None:
    assert LIMITS.measured_hint(exit_code, stderr) == said


def test_a_limit_not_set_is_never_named() -> None:
    assert Limits(processes=64).measured_hint(1, "MemoryError") == ""
    assert Limits().prlimit_args() == []
    assert Limits(file_mb=2).prlimit_args()[1:] == [f"--fsize={2 * 1024 * 1024}", "--"]
