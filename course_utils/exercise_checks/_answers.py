"""What every check shares: the failure a student sees, answers not given yet, and errors raised by the
student's own code turned into a message instead of a traceback from inside the checks."""

from __future__ import annotations

import traceback


class CheckFailed(AssertionError):
    """An answer is wrong; the message says why and what to do.

    An ``AssertionError``, as autograders (nbgrader) expect. In Jupyter it shows as its message alone:
    IPython renders an exception with ``_render_traceback_`` by calling it, and the frames inside the
    checks would only hide the message.
    """

    def _render_traceback_(self) -> list[str]:
        return [f"CheckFailed: {line}" if i == 0 else line for i, line in enumerate(str(self).splitlines())]


def require(namespace: dict, exercise: int | str, *names: str) -> None:
    """Fail with "not answered yet" when a name an exercise defines is missing from ``namespace``
    (the notebook's ``globals()``): its cell still raises ``NotImplementedError``, failed, or has not run."""
    missing = [name for name in names if name not in namespace]
    if missing:
        listed = ", ".join(f"`{name}`" for name in missing)
        raise CheckFailed(
            f"Exercise {exercise} is not answered yet: {listed} {'is' if len(missing) == 1 else 'are'} not defined. "
            "Write the answer in the cell(s) marked `# YOUR CODE HERE` above (replacing `raise "
            "NotImplementedError()`), run them, then run this check again.")


ARGS_HINT = ("`strategy.run(fn, args=...)` calls `fn(*args)` on every replica: for a `replica_step(images, "
             "labels)` pass the (images, labels) pair itself, `args=batch`; for a `replica_step(batch)` wrap it, "
             "`args=(batch,)` (as notebook 03 does).")


def student_error(err: BaseException, what: str) -> CheckFailed:
    """A :class:`CheckFailed` for an exception raised by the student's code while a check ran it: the
    error's own words, the line of the notebook it came from, and a hint for the classic causes."""
    text = str(err).strip()
    last = text.splitlines()[-1] if text else type(err).__name__
    where = [frame for frame in traceback.extract_tb(err.__traceback__)
             if "ipykernel" in frame.filename or frame.filename.startswith("<ipython")]
    place = f" (notebook line: `{where[-1].line.strip()}`)" if where and where[-1].line else ""
    hint = ""
    if "PerReplica" in text or "DistributedValues" in text:  # a distributed value used outside strategy.run
        last = "it was called on per-replica values (PerReplica)"
        hint = (" A distributed batch holds one part per replica, which only strategy.run unpacks: run the replica "
                "step on every replica with strategy.run(replica_step, args=batch), then strategy.reduce its losses.")
    elif "positional argument" in text:
        hint = " " + ARGS_HINT
    elif isinstance(err, NameError):
        hint = " Run the cells above this one first (Run > Run All Above Selected Cell)."
    return CheckFailed(f"{what} raised {type(err).__name__}: {last}{place}.{hint}")
