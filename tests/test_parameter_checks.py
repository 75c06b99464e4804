"""Every notebook's parameter checks, executed alone: the parameters cell, then the ``check-parameters`` cell.

Values students try (3 devices or workers, batches that do not divide) either pass -- the notebook then
runs with them -- or stop in that cell with a message naming values that work. No TensorFlow here: the
checks run before the devices are configured.
"""

from __future__ import annotations

import nbformat
import papermill as pm
import pytest

from course_utils import parameters
from tools import notebook_params
from tools.notebook_params import ROOT, course_notebooks, smoke_parameters

NOTEBOOKS = [str(p.relative_to(ROOT)) for p in course_notebooks()]


def run_checks(notebook: str, **overrides) -> None:
    """Execute the notebook's parameters cell, the overrides (as papermill injects them), then its checks."""
    cells = nbformat.read(ROOT / notebook, as_version=4).cells
    at = next(i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", []))
    check = next(c for c in cells[at:] if parameters.CHECK_TAG in c.metadata.get("tags", []))  # after the install
    namespace: dict = {}
    exec(cells[at].source, namespace)  # noqa: S102 (the notebook's own cells)
    namespace.update(overrides)
    exec(check.source, namespace)  # noqa: S102


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_default_and_smoke_values_pass(notebook):
    run_checks(notebook)
    run_checks(notebook, **smoke_parameters(ROOT / notebook))


@pytest.mark.parametrize(("notebook", "values"), [
    ("notebooks/02_mirrored_strategy_fit.ipynb", {"NUM_DEVICES": 3}),
    ("notebooks/02_mirrored_strategy_fit.ipynb", {"NUM_DEVICES": 3, "TEST_LIMIT": 99}),  # first batch 99 = 3 x 33
    ("notebooks/04_single_vs_multi_device.ipynb", {"NUM_DEVICES": 3, "LIMIT": 2304}),  # test batches: 3 x 166
    ("notebooks/04_single_vs_multi_device.ipynb", {"NUM_DEVICES": 3, "LIMIT": 2304, "TEST_LIMIT": 255}),
    ("notebooks/02_mirrored_strategy_fit.ipynb", {"NUM_DEVICES": 3, "TEST_LIMIT": 10_000 - 16 + 3}),
    ("notebooks/02_mirrored_strategy_fit.ipynb", {"NUM_DEVICES": 3, "LR_SCALE": 4}),  # section 5's batch: 768
    ("notebooks/deeper/02_inside_fit.ipynb", {"NUM_DEVICES": 3}),
    ("notebooks/04_single_vs_multi_device.ipynb", {"NUM_DEVICES": 3, "LIMIT": 59_904}),
    ("notebooks/05_multi_worker.ipynb", {"WORKERS": 3}),
    ("notebooks/deeper/05_multi_worker_inside.ipynb", {"WORKERS": 3}),
    ("notebooks/06_parameter_servers.ipynb", {"WORKERS": 3, "PER_STEP_BATCH": 99}),
    ("solutions/07_svhn.ipynb", {"NUM_DEVICES": 3, "TEST_LIMIT": 1000}),
    ("notebooks/01_strategies_overview.ipynb", {"NUM_DEVICES": 3}),
    ("notebooks/03_custom_training_loop.ipynb", {"NUM_DEVICES": 4, "TRAIN_REPLICAS": None}),
    ("notebooks/03_custom_training_loop.ipynb", {"TEST_LIMIT": 130}),  # a last test batch of 2: one example each
    ("notebooks/deeper/03_loss_scaling_and_loop_speed.ipynb", {"NUM_DEVICES": 4, "TRAIN_REPLICAS": None}),
    ("notebooks/08_slurm.ipynb", {"TASKS_PER_NODE": 1, "NODES": 1}),
    ("notebooks/08_slurm.ipynb", {"TASKS_PER_NODE": 1, "NODES": 2}),
    ("notebooks/deeper/08_slurm_checks.ipynb", {"TASKS_PER_NODE": 1, "NODES": 1}),
])
def test_other_device_and_worker_counts_that_work_pass(notebook, values):
    run_checks(notebook, **values)


@pytest.mark.parametrize(("notebook", "values", "message"), [
    ("notebooks/06_parameter_servers.ipynb", {"WORKERS": 3, "PER_STEP_BATCH": 100},
     "PER_STEP_BATCH = 100 is not a multiple of WORKERS = 3: the synchronous run splits every step's examples "
     "evenly over the workers. Use a multiple of 3, e.g. PER_STEP_BATCH = 99 or 102, or change WORKERS."),
    ("notebooks/02_mirrored_strategy_fit.ipynb", {"NUM_DEVICES": 3, "TEST_LIMIT": 100},
     "TEST_LIMIT = 100: the first batch would be 100 examples, which NUM_DEVICES = 3 replicas cannot split evenly"),
    ("solutions/07_svhn.ipynb", {"NUM_DEVICES": 3, "TEST_LIMIT": 100},
     "Use a multiple of 3, e.g. TEST_LIMIT = 99 or 102"),
    ("notebooks/04_single_vs_multi_device.ipynb", {"NUM_DEVICES": 3, "LIMIT": 2304, "TEST_LIMIT": 2},
     "TEST_LIMIT = 2: the first batch would be 2 examples"),
    # 255 + 1: two empty replicas
    ("notebooks/04_single_vs_multi_device.ipynb", {"NUM_DEVICES": 3, "LIMIT": 2304, "TEST_LIMIT": 256},
     "TEST_LIMIT = 256: the last batch would be 1 example, which leaves some of the NUM_DEVICES = 3 replicas none"),
    ("notebooks/02_mirrored_strategy_fit.ipynb", {"TEST_LIMIT": 257}, "e.g. TEST_LIMIT = 256 or 258"),
    ("notebooks/04_single_vs_multi_device.ipynb", {"NUM_DEVICES": 0}, "NUM_DEVICES = 0: give a whole number"),
    ("notebooks/04_single_vs_multi_device.ipynb", {"SCALING_BATCHES": [8, 0]}, "SCALING_BATCHES[1] = 0"),
    ("notebooks/05_multi_worker.ipynb", {"LIMIT": 100}, "PER_WORKER_BATCH * WORKERS = 128 is more than LIMIT = 100"),
    ("notebooks/05b_network_links.ipynb", {"TRAIN_IMAGES": 500}, "Use TRAIN_IMAGES >= 768"),
    ("notebooks/02_mirrored_strategy_fit.ipynb", {"EPOCHS": 2.5}, "EPOCHS = 2.5: give a whole number"),
    ("notebooks/03_custom_training_loop.ipynb", {"TRAIN_REPLICAS": 4},
     "TRAIN_REPLICAS = 4 is more than NUM_DEVICES = 3"),
    ("notebooks/08_slurm.ipynb", {"TASKS_PER_NODE": 17},
     "TASKS_PER_NODE = 17 is more than a job step's ports per node"),
    ("notebooks/08_slurm.ipynb", {"NODES": 16, "TASKS_PER_NODE": 16},
     "NODES * TASKS_PER_NODE = 256 is more than twice this machine's cores"),
    ("notebooks/08_slurm.ipynb", {"WARN_SECONDS": 120}, "the warning must come before the 2-minute limit"),
    ("notebooks/08_slurm.ipynb", {"LIMIT": 200}, "PER_WORKER_BATCH * NODES * TASKS_PER_NODE = 256 is more than LIMIT"),
    ("notebooks/deeper/08_slurm_checks.ipynb", {"FIT_EPOCHS": 1}, "Use FIT_EPOCHS >= 2"),
    ("notebooks/01_strategies_overview.ipynb", {"NUM_DEVICES": -1}, "NUM_DEVICES = -1: give a whole number"),
    ("notebooks/01_strategies_overview.ipynb", {"NUM_DEVICES": 1}, "Use NUM_DEVICES >= 2"),
    ("notebooks/04_single_vs_multi_device.ipynb", {"NUM_DEVICES": 3, "LIMIT": None},
     "LIMIT = 60000 is not a multiple of 4 * PER_REPLICA_BATCH * NUM_DEVICES = 768"),
    ("notebooks/04_single_vs_multi_device.ipynb", {"NUM_DEVICES": 3},  # 2048: the larger-batch cure's batch is 768
     "Use a multiple of 768, e.g. LIMIT = 1536 or 2304"),
    ("notebooks/04_single_vs_multi_device.ipynb", {"LIMIT": 384}, "e.g. LIMIT = 512"),
    # the page's custom loop tests LIMIT // 6 = 4 images in batches of 3: its last batch leaves two replicas none
    ("notebooks/04_single_vs_multi_device.ipynb", {"NUM_DEVICES": 3, "PER_REPLICA_BATCH": 1, "LIMIT": 24},
     "the page's loop test set, min(TEST_LIMIT, LIMIT // 6), = 4: the last batch would be 1 example"),
    ("notebooks/04_single_vs_multi_device.ipynb", {"SWEEP_IMAGES": 128}, "Use SWEEP_IMAGES >= 256"),
    ("notebooks/02_mirrored_strategy_fit.ipynb", {"EPOCHS": 3}, "Use EPOCHS >= 4"),
    ("notebooks/02_mirrored_strategy_fit.ipynb", {"LR_SCALE": 128},
     "LR_SCALE * PER_REPLICA_BATCH * NUM_DEVICES = 16384 is more than LR_IMAGES = 12000"),
    ("notebooks/02_mirrored_strategy_fit.ipynb", {"LIMIT": 1000}, "is more than LIMIT = 1000"),  # section 5: 1,024
    ("notebooks/02_mirrored_strategy_fit.ipynb", {"NUM_DEVICES": 3, "LR_IMAGES": 1537},
     "LR_IMAGES = 1537: the last batch would be 1 example"),
    ("notebooks/deeper/02_inside_fit.ipynb", {"TEST_LIMIT": 129},
     "TEST_LIMIT = 129: the last batch would be 1 example"),
    ("notebooks/deeper/02_inside_fit.ipynb", {"EPOCHS": 1}, "Use EPOCHS >= 2"),
    ("notebooks/05_multi_worker.ipynb", {"EPOCHS": 2}, "the fault is placed in the second-to-last epoch"),
    ("notebooks/05_multi_worker.ipynb", {"WORKERS": 1}, "Use WORKERS >= 2"),
    ("notebooks/deeper/05_multi_worker_inside.ipynb", {"EPOCHS": 2},
     "the fault is placed in the second-to-last epoch"),
    ("notebooks/deeper/05_multi_worker_inside.ipynb", {"LIMIT": 100},
     "PER_WORKER_BATCH * WORKERS = 128 is more than LIMIT"),
    ("notebooks/06_parameter_servers.ipynb", {"WORKERS": 1}, "worker 1 is killed while another keeps training"),
    ("notebooks/03_custom_training_loop.ipynb", {"NUM_DEVICES": 2, "TRAIN_REPLICAS": 2}, "Use NUM_DEVICES >= 3"),
    ("notebooks/03_custom_training_loop.ipynb", {"TEST_LIMIT": 129},
     "TEST_LIMIT = 129: the last batch would be 1 example, which leaves some of the TRAIN_REPLICAS = 2 replicas none"),
    ("notebooks/03_custom_training_loop.ipynb", {"LIMIT": 100}, "Use LIMIT >= 128"),
    ("notebooks/deeper/03_loss_scaling_and_loop_speed.ipynb", {"NUM_DEVICES": 2, "TRAIN_REPLICAS": 2},
     "Use NUM_DEVICES >= 3"),
    ("notebooks/deeper/03_loss_scaling_and_loop_speed.ipynb", {"SMALL_PER_REPLICA_BATCH": 128}, "in increasing order"),
    ("notebooks/deeper/03_loss_scaling_and_loop_speed.ipynb", {"TRAIN_REPLICAS": 2, "LIMIT": 64}, "Use LIMIT >= 128"),
    ("notebooks/05b_network_links.ipynb", {"SLOW": "10gbit"}, "SLOW = '10gbit' is not one of RATES"),
    ("notebooks/05b_network_links.ipynb", {"SCALING_BATCHES": [128, 32]}, "in increasing order"),
    ("notebooks/05b_network_links.ipynb", {"GPU_STEP_MS": [10, 0]}, "GPU_STEP_MS[1] = 0"),
    ("notebooks/deeper/05b_network_links_inside.ipynb", {"SLOW": "10gbit"}, "SLOW = '10gbit' is not one of RATES"),
    ("notebooks/deeper/05b_network_links_inside.ipynb", {"LIMIT": 32}, "Use LIMIT >= 64"),
    ("notebooks/06_parameter_servers.ipynb", {"STEPS": 39}, "Use STEPS >= 40"),
    ("notebooks/deeper/06_parameter_servers_inside.ipynb", {"TIMING_STEPS": 42},
     "TIMING_STEPS = 42 is not a multiple of STEPS_PER_CALL = 5"),
])
def test_values_that_cannot_work_stop_with_a_message(notebook, values, message):
    with pytest.raises(parameters.ParameterError) as stopped:
        run_checks(notebook, **values)
    assert message in str(stopped.value)


def test_divisible_offers_the_nearest_multiples():
    with pytest.raises(parameters.ParameterError, match=r"e\.g\. B = 3\b"):
        parameters.divisible("B", 2, "N", 3, why="x")
    parameters.divisible("B", 6, "N", 3, why="x")
    with pytest.raises(parameters.ParameterError, match="Use N <= 4"):
        parameters.at_most("N", 5, "L", 4, why="x")
    parameters.batches_split("T", None, 96, 3, "R")  # the whole split: the first batch is a full 96
    parameters.batches_split("T", 97 + 3, 96, 3, "R")  # a last batch of 4: every replica gets one or two
    with pytest.raises(parameters.ParameterError, match="the last batch would be 1 example"):
        parameters.batches_split("T", 97, 96, 3, "R")


def test_the_smoke_setting_never_asks_for_more_than_a_notebooks_own_default():
    assert smoke_parameters(ROOT / "notebooks/02_mirrored_strategy_fit.ipynb")["EPOCHS"] == 4  # its schedule's drop
    assert smoke_parameters(ROOT / "notebooks/08_slurm.ipynb")["EPOCHS"] == 2  # its own default
    assert smoke_parameters(ROOT / "notebooks/05_multi_worker.ipynb")["EPOCHS"] == 3
    assert smoke_parameters(ROOT / "notebooks/04_single_vs_multi_device.ipynb")["LIMIT"] == 512  # smaller: smoke's


def test_a_notebooks_own_smoke_values_replace_the_shared_ones_for_it_alone():
    assert smoke_parameters(ROOT / "notebooks/deeper/08_slurm_checks.ipynb")["TASKS_PER_NODE"] == 1
    assert "TASKS_PER_NODE" not in smoke_parameters(ROOT / "notebooks/08_slurm.ipynb")  # the lesson keeps 2 x 2
    for rel, own in notebook_params.SMOKE_FOR.items():
        declared = pm.inspect_notebook(str(ROOT / rel))
        assert set(own) <= set(declared), f"{rel} declares no {set(own) - set(declared)}"
