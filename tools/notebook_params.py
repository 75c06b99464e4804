"""Where the course's notebooks are, and the smoke setting CI runs them in."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import papermill as pm
from papermill.iorw import load_notebook_node
from papermill.parameterize import parameterize_notebook

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIRS = ("notebooks", "notebooks/deeper", "solutions")  # lessons, their deeper notebooks, solutions

# The smoke setting: every notebook names its parameters from this list, and
# gets the ones it declares. Few examples, few epochs: proves the notebook runs.
SMOKE = {
    "EPOCHS": 4,  # notebook 02's decay schedule drops the learning rate after epoch 3: check it
    "LIMIT": 512,
    "TEST_LIMIT": 256,
    "PER_REPLICA_BATCH": 32,
    "TIMING_STEPS": 4,
    "TIMING_EPOCHS": 1,
    "TIMING_ROUNDS": 1,
    "STEPS_PER_CALL": 2,
    "SCALING_BATCHES": [16, 32],
    "SCALING_IMAGES": 256,
    "STEPS": 40,
    "FIT_STEPS": 5,
    "OUTAGE_S": 3.0,
    "TRAIN_IMAGES": 1024,
    "SWEEP_IMAGES": 256,
    "SEED_EPOCHS": 2,  # notebook 04: the first epoch (tracing) and one more
    "RUN_ROUNDS": 1,
    "UNTIMED_FIRST": False,  # notebook 04: with one round there is no round 1 to keep first-use costs out of
    "PROFILE_STEPS": 3,
    "PROFILE_ROUNDS": 1,
    # 05b and deeper/05b: a 100 Mbit/s link costs ~0.9 s per update whatever the batch; 1 Gbit/s proves the same
    # code, and one rate-limited link the sweep's (their one-worker run sets the unlimited one): a launch less each
    "RATES": ["1gbit"],
    "SLOW": "1gbit",
    "ACCURACY_RUNS": 1,  # notebook 05b: the baseline proves the accuracy code; each run is a 2-worker launch
    "LOST_WAIT_S": 30,  # deeper/05: a frozen worker is noticed after TensorFlow's 10 s heartbeat timeout
    # notebook 08: on 512 images its time-limit job ends before the warning with 12 epochs or 2 (the same code,
    # 2 epoch-end saves instead of 12)
    "LONG_EPOCHS": 2,
}
# One notebook's own smoke values, over the shared ones above (a name it shares with another notebook that
# needs the shared value), each with its reason.
SMOKE_FOR = {
    # lesson 08 runs its 2 nodes x 2 tasks in CI; the checks here hold on 2 x 1, with half of its workers
    # (in each of section 1's two runs and section 3's two) to start
    "notebooks/deeper/08_slurm_checks.ipynb": {"TASKS_PER_NODE": 1},
}


def course_notebooks() -> list[Path]:
    """Every notebook the course command executes, in course order."""
    found: list[Path] = []
    for folder in NOTEBOOK_DIRS:
        found += sorted((ROOT / folder).glob("[0-9]*.ipynb"))
    return found


def _default(declared: dict, name: str):
    try:
        return ast.literal_eval(declared[name]["default"])
    except (ValueError, SyntaxError):
        return None  # an expression: no number to compare with


def smoke_parameters(path: Path) -> dict:
    """The smoke values for the parameters this notebook declares (``SMOKE``, with its ``SMOKE_FOR`` row over it).

    A whole-number smoke value never asks for more than the notebook's own default (the shared
    ``EPOCHS = 4`` is for notebook 02's schedule; a notebook that trains 2 epochs keeps 2).
    """
    declared = pm.inspect_notebook(str(path))
    found = {}
    resolved = Path(path).resolve()
    own = SMOKE_FOR.get(resolved.relative_to(ROOT).as_posix(), {}) if resolved.is_relative_to(ROOT) else {}
    for name, value in {**SMOKE, **own}.items():
        if name in declared:
            default = _default(declared, name)
            smaller = (isinstance(default, int) and not isinstance(default, bool) and isinstance(value, int)
                       and default < value)
            found[name] = default if smaller else value
    return found


def smoke_notebook(path: Path) -> nbformat.NotebookNode:
    """The committed notebook, outputs kept, with papermill's injected-parameters cell for the smoke setting.

    Loaded with papermill's own loader, which adds the metadata its parameterizer expects (the
    course command strips papermill's run metadata from committed notebooks).
    """
    return parameterize_notebook(load_notebook_node(str(path)), smoke_parameters(path))
