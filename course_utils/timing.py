"""Wall-clock timing for side-by-side measurements: interleaved repeats, median and spread."""

from __future__ import annotations

import time
from statistics import median  # re-exported: notebooks call timing.median


class Stopwatch:
    """``with Stopwatch() as sw: ...`` then ``sw.seconds``; also usable with start()/stop()."""

    def __init__(self):
        self._start: float | None = None
        self.seconds: float | None = None

    def start(self) -> Stopwatch:
        self._start = time.perf_counter()
        self.seconds = None
        return self

    def stop(self) -> float:
        if self._start is None:
            raise RuntimeError("Stopwatch.stop() called before start()")
        self.seconds = time.perf_counter() - self._start
        self._start = None
        return self.seconds

    def __enter__(self) -> Stopwatch:
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


def interleaved_rates(variants: dict, examples: int | dict, rounds: int, warmup: int = 1) -> dict[str, list[float]]:
    """Time ``{name: run_once}`` side by side; return each variant's throughput per run.

    Every variant first runs ``warmup`` times untimed (tracing, compiling, filling caches);
    then, ``rounds`` times, each variant runs once in turn. Interleaving spreads a slow
    spell of a shared machine over all variants instead of one, and the repeats give
    the median and spread that :func:`spread_table` prints. ``examples`` is what one
    run processes (images per epoch, say): one number for all variants, or
    ``{name: examples}`` when they differ (full batches of different sizes, say).
    """
    if rounds < 1 or warmup < 0:
        raise ValueError(f"need rounds >= 1 and warmup >= 0, got rounds={rounds}, warmup={warmup}")
    counts = examples if isinstance(examples, dict) else dict.fromkeys(variants, examples)
    if missing := [name for name in variants if name not in counts]:
        raise KeyError(f"examples has no count for {missing}: give one per variant, or one number for all")
    for run_once in variants.values():
        for _ in range(warmup):
            run_once()
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run_once in variants.items():
            start = time.perf_counter()
            run_once()
            rates[name].append(throughput(counts[name], time.perf_counter() - start))
    return rates


def spread_table(rates: dict, baseline: str, unit: str = "images/s") -> str:
    """One line per variant: median, min-max over the repeats, and the ratio of medians to ``baseline``."""
    if baseline not in rates:
        raise KeyError(f"baseline {baseline!r} is not one of {sorted(rates)}")
    base = median(rates[baseline])
    width = max(len(name) for name in rates)
    lines = [f"{'':<{width}}  {'median':>8}  {'min-max':>13}  {'median vs ' + baseline}"]
    for name, values in rates.items():
        spread = f"{min(values):.0f}-{max(values):.0f}"
        lines.append(f"{name:<{width}}  {median(values):8.0f}  {spread:>13}  {median(values) / base:.2f}x"
                     f"   ({unit}, {len(values)} runs)")
    return "\n".join(lines)
