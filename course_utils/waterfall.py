"""Whole training runs timed side by side, one difference at a time, and the chart that adds them up.

A *chain* is a list of run configurations where each one changes one thing from the one before (drop the
validation, add a callback, switch strategy). :func:`interleaved_runs` times every configuration as a whole
run, in turn, ``rounds`` times; :func:`chain_steps` gives what each change cost: the difference of the two
configurations' fastest runs (slow spells of a shared machine only ever add time, so the fastest of the
repeats is the least disturbed; these differences add up exactly along the chain), the range of its paired
differences (same round, one run after the other), and a verdict by the course's rule (the two
configurations' ranges of whole-run times must separate); :mod:`course_utils.waterfall_charts` draws
them (also reachable here: ``waterfall.plot_waterfall``, ``waterfall.plot_differences``).
:func:`compare` prints a verdict in one short line (the rule once per notebook:
:func:`course_utils.verdicts.legend`); :func:`compare_side` gives the same decision as data.

A run function returns a :class:`Run` when it times itself (its timer starting where the code it
reproduces started one), or else the seconds of each epoch it trained (or ``None``) and the whole call is
timed here; the epochs split a run into set-up (whatever came before the first epoch), first epoch and
the rest. As in ``timeit``, the garbage collector is off during each run: a run that builds a model
leaves large cycles behind (its traced functions), and collecting them in the middle of the next run
would charge it for the previous one; they are collected between runs, outside the timers.
"""

from __future__ import annotations

import gc
import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from statistics import median

from course_utils import verdicts
from course_utils.waterfall_charts import plot_differences, plot_waterfall

__all__ = [  # the charts live in waterfall_charts; they stay reachable as waterfall.plot_*
    "Run", "Step", "chain_steps", "compare", "compare_side", "fastest", "interleaved_runs", "load_runs",
    "plot_differences", "plot_waterfall", "save_runs", "seconds", "step_table"]


@dataclass(frozen=True)
class Run:
    """One whole timed run: its wall time and, when the run function reported them, its epochs' times
    (``epochs``: each epoch's steps) and the time each epoch spent outside its steps (``boundaries``: for
    ``fit``, its input iterators made and deleted, validation, the callbacks' end-of-epoch work;
    :class:`course_utils.callbacks.Throughput` records both). ``waits``, when reported: the part of each
    boundary spent on input iterators that the run could time (for ``fit``, from the epoch's start to its
    first batch, ``Throughput.before_training_seconds``: Keras 3's deletions and the epoch's new iterator;
    the iterator it makes after an epoch's last batch is not in it), and ``last_wait``, the time after the last
    epoch spent deleting the run's last input iterators; :meth:`without_waits` takes both out."""

    seconds: float
    epochs: tuple[float, ...] = ()
    boundaries: tuple[float, ...] = ()
    waits: tuple[float, ...] = ()
    last_wait: float = 0.0

    def __post_init__(self):
        if self.boundaries and len(self.boundaries) != len(self.epochs):
            raise ValueError(f"{len(self.boundaries)} epoch boundaries for {len(self.epochs)} epochs: one per epoch")
        if self.waits and len(self.waits) != len(self.boundaries):
            raise ValueError(f"{len(self.waits)} iterator waits for {len(self.boundaries)} boundaries: one per epoch")
        slack = 1e-9 * max(1.0, abs(self.seconds))  # float rounding of parts measured to add up
        if any(w < 0 or w > b + slack for w, b in zip(self.waits, self.boundaries)):
            raise ValueError(f"iterator waits {self.waits} must lie within their epoch boundaries {self.boundaries}")
        if not 0 <= self.last_wait <= max(self.outside_epochs, 0.0) + slack:
            raise ValueError(f"the last wait, {self.last_wait} s, must lie within the time outside the epochs, "
                             f"{self.outside_epochs} s")

    def without_waits(self) -> Run:
        """A run like this one with its iterator waits taken out: of its time, its boundaries and (the last
        wait) the time outside its epochs (with neither waits nor a last wait: an equal run)."""
        return Run(self.seconds - sum(self.waits) - self.last_wait, self.epochs,
                   tuple(b - w for b, w in zip(self.boundaries, self.waits or (0.0,) * len(self.boundaries))))

    @property
    def setup(self) -> float:
        """Seconds outside the epochs' steps: before the first epoch (model building, compiling), at the epochs'
        boundaries, and after the last, when epochs are known."""
        return self.seconds - sum(self.epochs)

    @property
    def outside_epochs(self) -> float:
        """Seconds before the first epoch began and after the last ended: :attr:`setup` without the boundaries."""
        return self.setup - sum(self.boundaries)

    @property
    def first_epoch_extra(self) -> float:
        """How much longer the first epoch took than the median of the others (tracing, first-call set-up)."""
        if len(self.epochs) < 2:
            raise ValueError("the first epoch's extra time needs at least 2 epochs")
        return self.epochs[0] - median(self.epochs[1:])


@dataclass(frozen=True)
class Step:
    """What changing ``before`` into ``name`` cost, in seconds per whole run (negative: it saved time):
    ``fastest``, the difference of their fastest runs, and ``differences``, round by round."""

    name: str
    before: str
    fastest: float
    differences: tuple[float, ...]
    verdict: str = field(compare=False)

    @property
    def median(self) -> float:
        return median(self.differences)


def interleaved_runs(variants: Mapping[str, Callable[[], Run | Sequence[float] | None]],
                     rounds: int, shuffle: int | None = None) -> dict[str, list[Run]]:
    """Run ``{name: run_whole}`` in turn, ``rounds`` times; a call that returns no :class:`Run` is timed whole.

    ``shuffle``: a seed; each round then runs the variants in an order of its own, so that a cost that
    comes from what ran just before (the first run of a kind after runs of another) does not always land
    on the same variant. Round ``i`` of every variant is still paired with round ``i`` of the others.
    """
    if rounds < 1:
        raise ValueError(f"need rounds >= 1, got {rounds}")
    runs: dict[str, list[Run]] = {name: [] for name in variants}
    orders = random.Random(shuffle)
    for _ in range(rounds):
        names = list(variants)
        if shuffle is not None:
            orders.shuffle(names)
        for name in names:
            run_whole = variants[name]
            gc.disable()
            try:
                start = time.perf_counter()
                result = run_whole()
            finally:
                gc.enable()
            runs[name].append(result if isinstance(result, Run) else
                              Run(time.perf_counter() - start, tuple(result or ())))
    return runs


def save_runs(runs: Mapping[str, Sequence[Run]], path: str | Path) -> None:
    """Write ``{name: [Run, ...]}`` (as :func:`interleaved_runs` returns it) to ``path`` as JSON, in its order."""
    Path(path).write_text(json.dumps({name: [asdict(r) for r in rs] for name, rs in runs.items()}, indent=1) + "\n")


def load_runs(path: str | Path) -> dict[str, list[Run]]:
    """The runs :func:`save_runs` wrote, to analyse again without re-running them."""
    found, names = json.loads(Path(path).read_text()), {f.name for f in fields(Run)}

    def run(saved: dict) -> Run:
        if unknown := set(saved) - names:
            raise ValueError(f"{path}: fields {sorted(unknown)} that a Run does not have (saved by another version?)")
        return Run(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()})

    return {name: [run(r) for r in rs] for name, rs in found.items()}


UNITS = {"s": 1.0, "ms": 1000.0}  # compare's printed units, per second


def seconds(runs: Sequence[Run]) -> list[float]:
    return [r.seconds for r in runs]


def fastest(runs: Sequence[Run]) -> Run:
    """The run least touched by the machine's slow spells."""
    return min(runs, key=lambda r: r.seconds)


def compare(runs: Mapping[str, Sequence[Run]], name: str, before: str, max_spread: float | None = None,
            unit: str = "s", *, long: bool = False) -> str:
    """The course's rule on whole-run times: longer or shorter only when the ranges separate, in one short
    line: ``b vs a: 2.1x slower (9.2 s vs 4.4 s, ranges separate)`` (medians; "faster" reads a's median over
    b's), ``within noise (..., ranges overlap)``, ``cannot tell (..., ranges too wide)``, or ``no verdict (1 run
    each)``; the rule is stated once, by :func:`course_utils.verdicts.legend`. ``unit``: "s" or "ms", how the
    times are printed. ``long=True``: the older line ("costs time: the ranges separate (...)", with the ranges).

    ``max_spread``: when the ranges overlap and either spans more than this share of its median, the runs
    are too wide to call the two equal, and the verdict says so instead of "within noise"."""
    if long:
        return _compare_long(runs, name, before, max_spread, unit)
    ours, theirs = seconds(runs[name]), seconds(runs[before])
    head = f"{name} vs {before}: "
    decided, why = verdicts.judge(ours, theirs, max_spread)
    if why == "few":
        return head + verdicts.no_verdict(ours, theirs)
    if unit not in UNITS:
        raise ValueError(f"unit is one of {sorted(UNITS)}, got {unit!r}")
    t, base = UNITS[unit] * median(ours), UNITS[unit] * median(theirs)
    a, b = verdicts.pair(t, base, apart=bool(decided))
    return head + verdicts.short_verdict(decided, why, t, base, f"{a} {unit} vs {b} {unit}", higher="slower",
                                         lower="faster")


def compare_side(runs: Mapping[str, Sequence[Run]], name: str, before: str,
                 max_spread: float | None = None) -> int | None:
    """:func:`compare`'s decision as data, in the sign of a time difference: +1 when ``name``'s whole runs
    take longer than ``before``'s (slower: the change costs time), -1 shorter (it saves time), 0 within
    noise, None cannot tell (fewer than 2 runs each, or overlapping ranges wider than ``max_spread``)."""
    return verdicts.side(seconds(runs[name]), seconds(runs[before]), max_spread)


def _compare_long(runs: Mapping[str, Sequence[Run]], name: str, before: str, max_spread: float | None,
                  unit: str) -> str:
    ours, theirs = seconds(runs[name]), seconds(runs[before])
    if len(ours) < 2 or len(theirs) < 2:
        return f"no verdict from {min(len(ours), len(theirs))} run(s) each (the rule needs 2 repeats)"
    if unit not in UNITS:
        raise ValueError(f"unit is one of {sorted(UNITS)}, got {unit!r}")
    k = UNITS[unit]
    side = verdicts.separate((min(ours), max(ours)), (min(theirs), max(theirs)))
    ends = (min(ours), max(theirs)) if side > 0 else (max(ours), min(theirs))  # separate ends print apart
    d = verdicts.decimals(k * ends[0], k * ends[1], least=2) if side else 2
    ranges = (f"{k * min(ours):.{d}f}-{k * max(ours):.{d}f} {unit} vs "
              f"{k * min(theirs):.{d}f}-{k * max(theirs):.{d}f} {unit}")
    if side > 0:
        return f"costs time: the ranges separate ({ranges})"
    if side < 0:
        return f"saves time: the ranges separate ({ranges})"
    wide = verdicts.spans(ours, theirs)
    if max_spread is not None and max(wide) > max_spread:
        return (f"cannot tell: the ranges overlap and span {wide[0]:.0%} and {wide[1]:.0%} of their medians "
                f"(more than {max_spread:.0%}: too wide to call them equal) ({ranges})")
    return f"within noise: the ranges overlap ({ranges})"


def chain_steps(runs: Mapping[str, Sequence[Run]], chain: Sequence[str], max_spread: float | None = None) -> list[Step]:
    """Each change along ``chain``: paired differences of whole-run times, round by round, and the verdict
    (:func:`compare`'s long line, with ``max_spread``: :func:`step_table` prints it under a header that names
    the rule, and marks the verdicts by their first words)."""
    if missing := [name for name in chain if name not in runs]:
        raise KeyError(f"no runs for {missing}: time them with interleaved_runs first")
    steps = []
    for before, name in zip(chain, chain[1:]):
        if len(runs[name]) != len(runs[before]):
            raise ValueError(f"{name!r} and {before!r} have different numbers of rounds: not paired")
        diffs = tuple(b.seconds - a.seconds for a, b in zip(runs[before], runs[name]))
        gap = fastest(runs[name]).seconds - fastest(runs[before]).seconds
        steps.append(Step(name, before, gap, diffs, compare(runs, name, before, max_spread, long=True)))
    return steps


IMPOSSIBLE = ("! its paired range, or its verdict, lies on the side its change cannot take (it only adds, or only "
              "removes, work): a cost that varies from run to run fell unevenly on the two configurations")


def step_table(steps: Sequence[Step], rule: str = "ranges of whole runs separate",
               sign: Mapping[str, int] | None = None) -> str:
    """The chain's steps, one line each; ``rule`` names what the verdicts compared, in the header. The
    "paired vs 0" column sets each step's range of paired differences against zero by the range rule
    (:func:`course_utils.verdicts.separate`): "above 0", "below 0", "includes 0", or "1 round" (the rule
    needs 2). ``sign``: ``{change: +1}`` for a change that only adds work, ``-1`` for one that only removes
    work (changes not in ``steps`` may be named: one mapping can serve several tables); a paired range wholly
    on the other side of 0, or a verdict that says the other ("saves time" for a change that only adds work,
    "costs time" for one that only removes it), is marked ``!``, explained (:data:`IMPOSSIBLE`) under the table."""
    sign, marked = sign or {}, False
    if bad := {name: v for name, v in sign.items() if v not in (1, -1)}:
        raise ValueError(f"sign takes +1 (only adds work) or -1 (only removes work) per change, got {bad}")
    width = max(len(s.name) for s in steps)
    lines = [f"{'change':<{width}}  {'fastest':>8}  {'paired, range':>15}  {'paired vs 0':<13}  "
             f"verdict (the rule: {rule})"]
    for s in steps:
        low, high = min(s.differences), max(s.differences)
        side = verdicts.separate((low, high), (0.0, 0.0)) if len(s.differences) > 1 else None
        said = "1 round" if side is None else {1: "above 0", -1: "below 0", 0: "includes 0"}[side]
        if side and side == -sign.get(s.name, 0):
            said, marked = said + " !", True
        verdict = s.verdict
        if verdict.startswith({1: "saves time", -1: "costs time"}.get(sign.get(s.name), "\0")):
            verdict, marked = "! " + verdict, True
        spread = f"{low:+.2f} to {high:+.2f}"
        lines.append(f"{s.name:<{width}}  {s.fastest:+7.2f}s  {spread:>15}  {said:<13}  {verdict}")
    return "\n".join(lines + ([IMPOSSIBLE] if marked else []))
