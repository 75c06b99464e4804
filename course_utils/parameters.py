"""Checks of a notebook's parameters, in the check cell after them (and after the Colab install cell): a
combination that cannot work stops the notebook there, before anything starts, with a message that names
values that would work.

Each function raises :class:`ParameterError` (a ``ValueError``) and returns nothing when the values are
fine. They know nothing of TensorFlow: ``tests/test_parameter_checks.py`` executes every notebook's
parameters cell and its ``check-parameters`` cell alone, for values students try (3 devices or workers,
batches that do not divide).
"""

from __future__ import annotations

CHECK_TAG = "check-parameters"  # the tag of the cell that calls these, after the parameters and install cells


class ParameterError(ValueError):
    """A parameter value (or a combination) the notebook cannot run with."""


def positive(**values) -> None:
    """Each value is a whole number >= 1 (``None`` is allowed where the notebook reads it as "all")."""
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ParameterError(f"{name} = {value!r}: give a whole number of at least 1.")


def at_least(name: str, value: int, minimum: int, why: str) -> None:
    """``value >= minimum``."""
    if value < minimum:
        raise ParameterError(f"{name} = {value}: {why}. Use {name} >= {minimum}.")


def one_of(name: str, value, choices_name: str, choices) -> None:
    """``value`` is one of ``choices``."""
    if value not in choices:
        raise ParameterError(f"{name} = {value!r} is not one of {choices_name} = {list(choices)!r}: "
                             f"use one of them, or add it to {choices_name}.")


def ascending(name: str, values) -> None:
    """``values`` are in increasing order, without repeats."""
    if list(values) != sorted(set(values)):
        raise ParameterError(f"{name} = {list(values)!r}: give them in increasing order without repeats, "
                             f"e.g. {sorted(set(values))!r}.")


def at_most(name: str, value: int, limit_name: str, limit: int, why: str) -> None:
    """``value <= limit``."""
    if value > limit:
        raise ParameterError(f"{name} = {value} is more than {limit_name} = {limit}: {why}. "
                             f"Use {name} <= {limit}.")


def divisible(name: str, value: int, by_name: str, by: int, why: str) -> None:
    """``value`` is a multiple of ``by``; the message offers the nearest multiples."""
    if value % by:
        below, above = by * (value // by), by * (value // by + 1)
        nearest = f"{below} or {above}" if below else f"{above}"
        raise ParameterError(f"{name} = {value} is not a multiple of {by_name} = {by}: {why}. "
                             f"Use a multiple of {by}, e.g. {name} = {nearest}, or change {by_name}.")


def batches_split(name: str, examples: int | None, batch: int, replicas: int, replicas_name: str) -> None:
    """``examples`` batched by ``batch`` give Keras 3 pieces it can use on ``replicas`` replicas.

    Keras 3's ``fit`` and ``evaluate`` under ``MirroredStrategy`` average the *first* batch over the
    replicas to build the model (``keras/src/backend/tensorflow/trainer.py``, ``_maybe_symbolic_build``):
    uneven pieces fail there ("Inputs to operation AddN ... must have the same size and shape"). A later,
    partial batch may split unevenly, but a replica left with *no* example fails in oneDNN's convolution
    ("input depth must be evenly divisible by filter depth"; TensorFlow uses oneDNN by default on x86 CPUs
    with AVX-512 VNNI/BF16 or AMX; Eigen's kernels, elsewhere, take it), so the check refuses it everywhere.
    ``examples`` ``None``: the split's size is not known
    here; only the first batch is checked (the whole split is larger than any batch).
    """
    first = batch if examples is None else min(batch, examples)
    last = 0 if examples is None or examples <= batch else examples % batch
    if first % replicas == 0 and not 0 < last < replicas:
        return
    near = first if examples is None else examples
    ok = [n for n in (replicas * (near // replicas), replicas * (near // replicas + 1)) if n > 0]
    piece = (f"the first batch would be {first} examples, which {replicas_name} = {replicas} replicas cannot "
             f"split evenly (Keras 3 then fails with 'Inputs to operation AddN ... must have the same size "
             f"and shape')" if first % replicas else
             f"the last batch would be {last} example{'s' * (last > 1)}, which leaves some of the "
             f"{replicas_name} = {replicas} replicas none (Keras 3 then fails in a convolution on CPUs where "
             f"TensorFlow uses oneDNN)")
    raise ParameterError(f"{name} = {examples}: {piece}. Use a multiple of {replicas}, e.g. {name} = "
                         f"{' or '.join(map(str, ok))}.")
