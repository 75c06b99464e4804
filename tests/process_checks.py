"""Process checks the launcher tests share."""

import time

import psutil


def alive(pid: int) -> bool:
    """Running: it exists and is not a zombie (orphans are re-parented to an init that may reap them late)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_until(condition, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
