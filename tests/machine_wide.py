"""Several tests at a time without two of them looking at the same processes.

``tasks.py test`` runs the unit tests with pytest-xdist, ``-n 3 --dist loadfile --no-loadscope-reorder``: each
file's tests run on one worker, in order, so that a module's fixture (servers, clusters) starts once, and the
files are handed out in the order below (xdist would reorder them by their number of tests). The files in
``MACHINE_WIDE`` look at every process or namespace on the machine (Slurm's daemons and janitors, a multi-node
cluster's namespaces, netlab's fixed ``dtc-*`` namespaces, the stress loops), so the scheduler here counts
them as one file: no two of their tests run at once. The files in ``IN_STEP`` start two-worker TensorFlow jobs
whose workers wait for each other at every step: two such jobs at once, one per worker, made each 3-4x slower
than alone (the twelve-run exit test took 105-126 s, 19 s for the fit worker asked to stop became 55-74 s).
They are counted as one file too, and run one after the other while the other workers take the rest.

xdist's own ``--dist loadgroup`` would do it with marks, but under pytest 9.2 its marks never reach the
scheduler (xdist 3.8 rewrites ``item._nodeid``, which pytest no longer reads). conftest.py imports both hooks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

MACHINE_WIDE = {"test_slurm.py", "test_interrupt_windows.py", "test_netlab.py", "test_stress.py"}
IN_STEP = {"test_multi_worker_scripts.py", "test_worker_exit.py"}
# The longest files are handed out first, so that neither worker is left alone with one at the end.
LONGEST_FIRST = (*sorted(IN_STEP), *sorted(MACHINE_WIDE))


def pytest_collection_modifyitems(config, items):
    order = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: order.get(item.path.name, len(order)))  # stable: the rest as collected


def scope(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, ``machine-wide`` or ``in-step``."""
    file = nodeid.split("::", 1)[0]
    name = Path(file).name
    return "machine-wide" if name in MACHINE_WIDE else "in-step" if name in IN_STEP else file


@pytest.hookimpl(optionalhook=True)  # xdist's hook: a run with -p no:xdist does not know it
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, with the machine-wide files as one file, and the in-step files as another."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # noqa: PLC0415 (only where xdist distributes)

    class MachineWideAsOneFile(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope(nodeid)

    return MachineWideAsOneFile(config, log)
