"""Run-dependent conclusions, printed from the numbers with the rule that decided them.

A notebook's prose states mechanisms; whether one variant was faster, or two accuracies differ, depends
on the machine and the run, so it is printed by these functions:

- :func:`separate`: the range rule itself: +1 / -1 when one range lies wholly above / below the other, 0
  when they overlap (used by :func:`speed` and :meth:`course_utils.scaling.Scaling.trend`);
- :func:`speed`: interleaved repeats of two variants differ only when their ranges separate;
- :func:`accuracy`: two test accuracies differ only when the gap exceeds twice its standard error
  (the gap's: sqrt(p(1-p)/n + q(1-q)/n) for accuracies p and q on n test examples).

Each verdict is one short line by default, e.g. ``tuned vs naive: 1.12x faster (2,392 vs 2,146 images/s,
ranges separate)``: the medians, the ratio of the medians and the verdict word. The rule is not repeated on
each line; a notebook prints it once, with :func:`legend`. ``long=True`` gives the older, longer lines that
state the rule and the ranges each time. The decision as data, to colour a chart or fill a table from the
same rule: :func:`side` (and :func:`judge`, which also says why it gave none), :func:`speed_side`,
:func:`accuracy_side`.
"""

from __future__ import annotations

import math
import statistics
import textwrap
from collections.abc import Sequence


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


# -- numbers as a short verdict prints them ------------------------------------------------------------------------

def _places(x: float) -> int:
    """Decimals that give ``x`` 2-3 significant digits: none from 100 up, one from 1 to 100, 2 significant
    digits below 1 (0.81, 0.012)."""
    a = abs(x)
    if a == 0 or not math.isfinite(a) or a >= 100:
        return 0
    return 1 if a >= 1 else min(6, 1 - math.floor(math.log10(a)))


def number(x: float) -> str:
    """``x`` with 2-3 significant digits and thousands separators: 2,392 / 453 / 45.3 / 9.2 / 0.81 / 0.012."""
    return f"{x:,.{_places(x)}f}"


def pair(a: float, b: float, apart: bool = False) -> tuple[str, str]:
    """``a`` and ``b`` printed with the same decimals (:func:`number`'s, the finer of the two); ``apart``: two
    numbers the rule told apart, printed with more decimals if they would otherwise print the same."""
    d = max(_places(a), _places(b))
    if apart:
        d = decimals(a, b, least=d)
    return f"{a:,.{d}f}", f"{b:,.{d}f}"


def ratio(big: float, small: float) -> str:
    """``big / small`` as "1.12x" (3 significant digits, more decimals if it would print as 1.00x); "" when
    ``small`` is not positive."""
    if small <= 0 or not math.isfinite(big / small):
        return ""
    r = big / small
    d = 2 if r < 10 else 1 if r < 100 else 0
    if f"{r:.{d}f}" == f"{1:.{d}f}":
        d = decimals(r, 1.0, least=d)
    return f"{r:.{d}f}x"


def ratio_word(big: float, small: float, word: str) -> str:
    """``word`` after the :func:`ratio` of ``big`` to ``small``: "1.12x faster" (the word alone without a ratio)."""
    return " ".join(filter(None, (ratio(big, small), word)))


def no_verdict(ours: Sequence[float], theirs: Sequence[float]) -> str:
    """What a short verdict says of too few repeats: "no verdict (1 run each)", "no verdict (1 and 3 runs)"."""
    if len(ours) == len(theirs):
        return f"no verdict ({len(ours)} run{'' if len(ours) == 1 else 's'} each)"
    return f"no verdict ({len(ours)} and {len(theirs)} runs)"


# -- the decision as data ------------------------------------------------------------------------------------------

def judge(ours: Sequence[float], theirs: Sequence[float],
          max_spread: float | None = None) -> tuple[int | None, str]:
    """The range rule on two lists of repeats, and why it gave no side: (side, why), side +1 / -1 / 0 as
    :func:`separate` (why ""), or None with why "few" (fewer than 2 repeats each) or "wide" (ranges that
    overlap and one spans more than ``max_spread`` of its median)."""
    if len(ours) < 2 or len(theirs) < 2:
        return None, "few"
    side = separate((min(ours), max(ours)), (min(theirs), max(theirs)))
    if side == 0 and max_spread is not None and max(spans(ours, theirs)) > max_spread:
        return None, "wide"
    return side, ""


def side(ours: Sequence[float], theirs: Sequence[float], max_spread: float | None = None) -> int | None:
    """The course's rule on two lists of repeats, as data: +1 when the range of ``ours`` lies wholly above
    that of ``theirs``, -1 wholly below, 0 when they overlap (within noise); None when it cannot tell (fewer
    than 2 repeats each, or ranges that overlap and one spans more than ``max_spread`` of its median)."""
    return judge(ours, theirs, max_spread)[0]


def speed_side(rates: dict, name: str, baseline: str, max_spread: float | None = None) -> int | None:
    """:func:`speed`'s decision as data, from ``{variant: [rate per repeat]}`` (higher is faster): +1
    ``name`` is faster than ``baseline``, -1 slower, 0 within noise, None cannot tell (too few repeats, or
    ranges too wide): e.g. to grey the bars of a chart the rule does not tell apart."""
    return side(rates[name], rates[baseline], max_spread)


def accuracy_side(p: float, q: float, n: int) -> int:
    """:func:`accuracy`'s decision as data: +1 when ``p`` is higher than ``q`` by more than twice the gap's
    standard error (each accuracy on ``n`` examples), -1 lower, 0 within noise."""
    gap, se = p - q, math.hypot(standard_error(p, n), standard_error(q, n))
    return (gap > 2 * se) - (gap < -2 * se)


# -- the verdicts --------------------------------------------------------------------------------------------------

def legend(max_spread: float | None = None, width: int = 100) -> str:
    """The rule behind the short verdicts in plain words, to print once per notebook (``max_spread``: the
    limit the notebook passes to :func:`speed`, if any). Lines of at most ``width`` characters."""
    paragraphs = [
        "- Speed: each variant is timed several times, interleaved; two differ only when their ranges (min-max) "
        "do not overlap (\"ranges separate\"), else they are \"within noise\". The numbers are medians, and "
        "\"1.12x faster\" is the ratio of the medians. Times (lower is faster) follow the same rule. \"No "
        "verdict\": fewer than 2 runs each."]
    if max_spread is not None:
        paragraphs.append(f"- Overlapping ranges wider than {max_spread:.0%} of their median give \"cannot tell\": "
                          "too wide to call the two equal.")
    paragraphs.append("- Accuracy: two differ only when the gap exceeds twice its standard error (2 SE; for "
                      "accuracies p and q on n test examples, SE = sqrt(p(1-p)/n + q(1-q)/n)).")
    wrapped = [textwrap.fill(p, width, subsequent_indent="  ", break_on_hyphens=False) for p in paragraphs]
    return "\n".join(["How to read the verdicts:", *wrapped])


def speed(rates: dict, name: str, baseline: str, unit: str = "images/s", max_spread: float | None = None, *,
          long: bool = False) -> str:
    """``name`` against ``baseline`` from ``{variant: [rate per repeat]}`` (higher is faster), in one short
    line: ``a vs b: 1.12x faster (2,392 vs 2,146 images/s, ranges separate)`` (medians; "1.41x slower" reads
    b's median over a's), ``within noise (..., ranges overlap)``, ``cannot tell (..., ranges too wide)``, or
    ``no verdict (1 run each)``. The rule is in :func:`legend`; ``long=True``: the older line that states it,
    with the ranges.

    ``max_spread``: when the ranges overlap and either spans more than this share of its median, the
    repeats are too wide to call the two equal, and the verdict says so instead of "within noise" (ranges
    that separate decide whatever their width). It names no cause: the width is measured, why it is wide
    is not."""
    if long:
        return _speed_long(rates, name, baseline, unit, max_spread)
    ours, theirs = rates[name], rates[baseline]
    head = f"{name} vs {baseline}: "
    decided, why = judge(ours, theirs, max_spread)
    if why == "few":
        return head + no_verdict(ours, theirs)
    m, base = statistics.median(ours), statistics.median(theirs)
    a, b = pair(m, base, apart=bool(decided))
    return head + short_verdict(decided, why, m, base, f"{a} vs {b} {unit}", higher="faster", lower="slower")


def short_verdict(decided: int | None, why: str, ours: float, theirs: float, numbers: str, higher: str,
                  lower: str) -> str:
    """The words of a short verdict after its names, from :func:`judge`'s ``(decided, why)`` and the two
    medians: ``1.12x faster (numbers, ranges separate)`` (``higher`` when ``ours`` lies above, the ratio
    ours/theirs; ``lower`` below, theirs/ours), ``cannot tell (numbers, ranges too wide)`` or
    ``within noise (numbers, ranges overlap)``. Speeds call "higher" faster; times call it slower."""
    if decided == 1:
        return f"{ratio_word(ours, theirs, higher)} ({numbers}, ranges separate)"
    if decided == -1:
        return f"{ratio_word(theirs, ours, lower)} ({numbers}, ranges separate)"
    if why == "wide":
        return f"cannot tell ({numbers}, ranges too wide)"
    return f"within noise ({numbers}, ranges overlap)"


def _speed_long(rates: dict, name: str, baseline: str, unit: str, max_spread: float | None) -> str:
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


def accuracy(p: float, q: float, n: int, name: str, baseline: str, *, long: bool = False) -> str:
    """Whether test accuracies ``p`` (of ``name``) and ``q`` (of ``baseline``), each on ``n`` examples, differ,
    in one short line: ``a vs b: more accurate (+0.019, 0.812 vs 0.793; 2 SE = 0.011)``, ``less accurate
    (...)`` or ``within noise (...)`` (2 SE: twice the gap's standard error, the rule's threshold). The rule is
    in :func:`legend`; ``long=True``: the older line that states it."""
    gap = p - q
    se = math.hypot(standard_error(p, n), standard_error(q, n))
    if long:
        rule = f"gap {gap:+.4f}, its standard error {se:.4f}"
        if se == 0:
            return f"{name} vs {baseline}: {'equal' if gap == 0 else 'different'} accuracies ({rule})"
        if abs(gap) > 2 * se:
            return f"{name} is {'more' if gap > 0 else 'less'} accurate than {baseline}: {rule}, more than twice it"
        return f"{name} and {baseline}: accuracies within noise ({rule}, less than twice it)"
    d = 3 if 2 * se == 0 or 2 * se >= 0.001 else 1 - math.floor(math.log10(2 * se))
    threshold = "0" if se == 0 else f"{2 * se:.{d}f}"
    accuracies = f"{p:.{d}f} vs {q:.{d}f}; 2 SE = {threshold}"
    decided = accuracy_side(p, q, n)
    if decided == 0 and gap == 0 and se == 0:
        return f"{name} vs {baseline}: equal accuracy ({accuracies})"
    word = {1: "more accurate", -1: "less accurate", 0: "within noise"}[decided]
    return f"{name} vs {baseline}: {word} ({gap:+.{d}f}, {accuracies})"
