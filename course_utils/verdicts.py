"""Run-dependent conclusions, printed from the numbers with the rule that decided them.

A notebook's prose states mechanisms; whether one variant was faster, or two accuracies differ, depends
on the machine and the run, so it is printed by these functions:

- :func:`separate`: the range rule itself: +1 / -1 when one range lies wholly above / below the other, 0
  when they overlap (used by :func:`speed` and :meth:`course_utils.scaling.Scaling.trend`);
- :func:`speed`: interleaved repeats of two variants differ only when their ranges separate;
- :func:`accuracy`: two test accuracies differ only when the gap exceeds twice its standard error,
  sqrt(p(1-p)/n) for each accuracy of n test examples.
"""

from __future__ import annotations

import math
import statistics


def separate(ours: tuple[float, float], theirs: tuple[float, float]) -> int:
    """The range rule on two (low, high) ranges: +1 when ``ours`` lies wholly above ``theirs``, -1 when
    wholly below, 0 when they overlap (or touch)."""
    (low, high), (their_low, their_high) = ours, theirs
    if low > high or their_low > their_high:
        raise ValueError(f"a range is (low, high) with low <= high, got {ours} and {theirs}")
    return 1 if low > their_high else -1 if high < their_low else 0


def decimals(a: float, b: float, least: int = 0, most: int = 6) -> int:
    """The fewest decimals, from ``least`` up to ``most``, at which ``a`` and ``b`` print differently: a
    verdict that ranges separate shows the gap between their touching ends."""
    return next((d for d in range(least, most + 1) if f"{a:.{d}f}" != f"{b:.{d}f}"), most)


def spans(*groups) -> list[float]:
    """Each group's range (max - min) as a share of its median: how far its repeats were disturbed."""
    return [(max(g) - min(g)) / statistics.median(g) for g in groups]


def against_zero(low: float, high: float) -> str:
    """The range rule on a range of differences (low, high): "above zero", "below zero", or, when it
    includes 0, "cannot tell from zero"."""
    return {1: "above zero", -1: "below zero", 0: "cannot tell from zero"}[separate((low, high), (0.0, 0.0))]


def speed(rates: dict, name: str, baseline: str, unit: str = "images/s", max_spread: float | None = None) -> str:
    """``name`` against ``baseline`` from ``{variant: [rate per repeat]}`` (higher is faster).

    ``max_spread``: when the ranges overlap and either spans more than this share of its median, the
    repeats are too wide to call the two equal, and the verdict says so instead of "within noise" (ranges
    that separate decide whatever their width). It names no cause: the width is measured, why it is wide
    is not."""
    ours, theirs = rates[name], rates[baseline]
    if len(ours) < 2 or len(theirs) < 2:
        return (f"{name} vs {baseline}: no verdict from {min(len(ours), len(theirs))} run(s) each "
                "(the rule needs the ranges of at least 2 interleaved repeats)")
    low, high, base_low, base_high = min(ours), max(ours), min(theirs), max(theirs)
    side = separate((low, high), (base_low, base_high))
    d = decimals(*((low, base_high) if side > 0 else (high, base_low))) if side else 0  # separate ends print apart
    ranges = f"{low:,.{d}f}-{high:,.{d}f} vs {base_low:,.{d}f}-{base_high:,.{d}f} {unit}"
    if side:
        return f"{name} is {'faster' if side > 0 else 'slower'} than {baseline}: the ranges separate ({ranges})"
    wide = spans(ours, theirs)
    if max_spread is not None and max(wide) > max_spread:
        return (f"{name} vs {baseline}: cannot tell from this run, the ranges overlap and span "
                f"{wide[0]:.0%} and {wide[1]:.0%} of their medians (more than {max_spread:.0%}: too wide to "
                f"call them equal) ({ranges})")
    return f"{name} and {baseline}: within noise, the ranges overlap ({ranges})"


def standard_error(p: float, n: int) -> float:
    """The standard error of an accuracy ``p`` measured on ``n`` examples."""
    if n < 1 or not 0 <= p <= 1:
        raise ValueError(f"need 0 <= p <= 1 and n >= 1, got p={p}, n={n}")
    return math.sqrt(p * (1 - p) / n)


def accuracy(p: float, q: float, n: int, name: str, baseline: str) -> str:
    """Whether test accuracies ``p`` (of ``name``) and ``q`` (of ``baseline``), each on ``n`` examples, differ."""
    gap = p - q
    se = math.hypot(standard_error(p, n), standard_error(q, n))
    rule = f"gap {gap:+.4f}, its standard error {se:.4f}"
    if se == 0:
        return f"{name} vs {baseline}: {'equal' if gap == 0 else 'different'} accuracies ({rule})"
    if abs(gap) > 2 * se:
        return f"{name} is {'more' if gap > 0 else 'less'} accurate than {baseline}: {rule}, more than twice it"
    return f"{name} and {baseline}: accuracies within noise ({rule}, less than twice it)"
