"""What the cluster launcher shows of its tasks' output: noise filter, progress, a status board.

- :data:`NOISE` matches TensorFlow's run-dependent log lines (timestamps, thread ids, gRPC
  details). The launcher leaves them out of what it shows; every line stays in the task's log file.
- :class:`Progress` reads ``epoch N`` and ``step N`` from a task's lines.
- :class:`StatusBoard` keeps one status line per task: updated in place in Jupyter, printed when
  it changes (at most every ``every_s`` seconds) elsewhere.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass

NOISE = re.compile(
    r"^(?:[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\]"       # absl C++ log lines (TensorFlow >= 2.16)
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] "             # TensorFlow's older C++ log format
    r"|WARNING: All log messages before absl::InitializeLog"
    r"|To enable the following instructions: "                  # continues a C++ line about CPU features
    r"|/job:\w+/replica:\d+/task:\d+$"                           # continues a C++ line listing devices
    r"|Additional GRPC error information"                       # gRPC details, continued on the next line
    r"|:\{?UNKNOWN:.*grpc_status"
    r"|\s*$)"
)
_EPOCH = re.compile(r"\bepoch[ =:]+(\d+)", re.I)
_STEP = re.compile(r"\bstep[ =:]+(\d+)", re.I)


@dataclass
class Progress:
    """The last ``epoch`` and ``step`` a task reported (``None`` until it reports one)."""

    epoch: int | None = None
    step: int | None = None

    def update(self, line: str) -> bool:
        """Read ``epoch N`` / ``step N`` from ``line``; True if either changed. A new epoch without a
        step resets the step."""
        epoch, step = _EPOCH.search(line), _STEP.search(line)
        if not (epoch or step):
            return False
        before = (self.epoch, self.step)
        if epoch:
            new_epoch = int(epoch.group(1))
            if new_epoch != self.epoch and not step:
                self.step = None
            self.epoch = new_epoch
        if step:
            self.step = int(step.group(1))
        return (self.epoch, self.step) != before

    def describe(self) -> str:
        parts = [f"epoch {self.epoch}" if self.epoch is not None else "",
                 f"step {self.step}" if self.step is not None else ""]
        return " ".join(p for p in parts if p) or "no progress yet"


def _in_jupyter() -> bool:
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class StatusBoard:
    """One line per task, ``name | status``."""

    def __init__(self, names, enabled: bool = True, every_s: float = 10.0):
        self.lines = {name: "waiting" for name in names}
        self.enabled, self.every_s = enabled, every_s
        self._handle, self._shown, self._last = None, "", float("-inf")
        if enabled and _in_jupyter():
            from IPython.display import Pretty, display  # noqa: PLC0415

            self._pretty = Pretty
            self._handle = display(Pretty(self.text()), display_id=True)

    def text(self) -> str:
        width = max(map(len, self.lines), default=0)
        return "\n".join(f"{name:<{width}} | {status}" for name, status in self.lines.items())

    def update(self, name: str, status: str) -> None:
        self.lines[name] = status
        self._show()

    def note(self, message: str) -> None:
        """An event worth its own line (a fault, a restart): printed below the board."""
        if self.enabled:
            print(message, flush=True)

    def _show(self, force: bool = False) -> None:
        now, text = time.monotonic(), self.text()
        if not self.enabled or text == self._shown:
            return
        if self._handle is not None:
            if force or now - self._last >= 0.5:
                self._handle.update(self._pretty(text))
                self._shown, self._last = text, now
        elif force or now - self._last >= self.every_s:
            print(text, flush=True)
            self._shown, self._last = text, now

    def close(self) -> None:
        self._show(force=True)
