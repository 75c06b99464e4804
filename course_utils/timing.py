"""Wall-clock timing and throughput arithmetic for side-by-side measurements."""

from __future__ import annotations

import time


class Stopwatch:
    """``with Stopwatch() as sw: ...`` then ``sw.seconds``; also usable with start()/stop()."""

    def __init__(self):
        self._start: float | None = None
        self.seconds: float | None = None

    def start(self) -> "Stopwatch":
        self._start = time.perf_counter()
        self.seconds = None
        return self

    def stop(self) -> float:
        if self._start is None:
            raise RuntimeError("Stopwatch.stop() called before start()")
        self.seconds = time.perf_counter() - self._start
        self._start = None
        return self.seconds

    def __enter__(self) -> "Stopwatch":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def throughput(examples: int, seconds: float) -> float:
    """Examples per second; raises on a non-positive duration instead of dividing by zero."""
    if seconds <= 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    if examples < 0:
        raise ValueError(f"examples must be >= 0, got {examples}")
    return examples / seconds


def ratio_table(results: dict[str, float], baseline: str, unit: str = "images/s") -> str:
    """Format ``{name: value}`` as aligned lines with each value's ratio to ``baseline``."""
    if baseline not in results:
        raise KeyError(f"baseline {baseline!r} is not one of {sorted(results)}")
    base = results[baseline]
    width = max(len(name) for name in results)
    lines = []
    for name, value in results.items():
        lines.append(f"{name:<{width}}  {value:10.1f} {unit}  {value / base:5.2f}x {baseline}")
    return "\n".join(lines)
