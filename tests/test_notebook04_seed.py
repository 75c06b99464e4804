"""Notebook 04 reproduces the seed's three runs as the seed ran them (read from the notebook's code, no run).

The seed's one-GPU run: ``fit(train_images, train_labels, batch_size=GLOBAL_BATCH_SIZE,
validation_split=0.15)`` on arrays, the timer started before the model was built, no callbacks; its
MirroredStrategy ``fit``: a tf.data pipeline and its callbacks; its custom loop: the test set every epoch,
a checkpoint every second epoch.
"""

from __future__ import annotations

import ast

import nbformat
import pytest

from tools.notebook_params import ROOT

NOTEBOOK = ROOT / "notebooks" / "04_single_vs_multi_device.ipynb"


@pytest.fixture(scope="module")
def code():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    return ast.parse("\n".join(c.source for c in nb.cells if c.cell_type == "code" and not c.source.startswith("%")))


def _assigned(tree, name):
    return next(node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in node.targets))


def _function(tree, name):
    return next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == name)


def _keywords(call):
    return {k.arg: k.value for k in call.keywords}


def _chain(tree, name):
    """``{label expression source: the call inside its lambda}`` of a FIT_CHAIN/LOOP_CHAIN dict."""
    found = {}
    for node in ast.walk(_assigned(tree, name)):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if key is not None and isinstance(value, ast.Lambda):
                    found[ast.unparse(key)] = value.body
    return found


def test_the_global_batch_is_the_per_replica_batch_times_the_replicas_with_the_seeds_64(code):
    assert ast.unparse(_assigned(code, "GLOBAL")) == "PER_REPLICA_BATCH * NUM_DEVICES"
    assert ast.literal_eval(_assigned(code, "PER_REPLICA_BATCH")) == 64


def test_the_one_device_run_is_the_seeds_global_batch_on_arrays_with_a_validation_split_of_0_15(code):
    fit_run = _function(code, "fit_run")
    calls = [n for n in ast.walk(fit_run) if isinstance(n, ast.Call) and ast.unparse(n.func) == "model.fit"]
    on_arrays = next(c for c in calls if ast.unparse(c.args[0]).startswith("train_images"))
    keywords = _keywords(on_arrays)
    assert ast.unparse(keywords["batch_size"]) == "GLOBAL"  # the same global batch as the distributed runs
    assert ast.unparse(keywords["validation_split"]) == "0.15 if validation else 0.0"
    one = _chain(code, "FIT_CHAIN")["ONE_SEED"]
    assert ast.unparse(one) == "fit_run(timer_from_build=True, validation=True)"  # arrays, no callbacks, tf.device


def test_the_distributed_runs_are_the_seeds(code):
    fit_seed = _chain(code, "FIT_CHAIN")["FIT_SEED"]
    assert ast.unparse(fit_seed) == "fit_run(mirrored, arrays=False, callbacks=list(SEED_CALLBACKS))"
    callbacks = ast.unparse(_assigned(code, "SEED_CALLBACKS"))
    for name in ("ModelCheckpoint", "TensorBoard", "LearningRateScheduler", "PrintLR"):
        assert name in callbacks
    assert ast.unparse(_chain(code, "LOOP_CHAIN")["LOOP_SEED"]) == "loop_run(evaluate=True, checkpoints=True)"
    loop = ast.unparse(_function(code, "loop_run"))
    assert "if checkpoints and epoch % 2 == 0:" in loop and "shuffle(n_train).batch(GLOBAL)" in loop


def test_each_link_of_the_chain_changes_one_switch(code):
    links = list(_chain(code, "FIT_CHAIN").values())
    def switches(call):
        return {**{f"arg{i}": ast.unparse(a) for i, a in enumerate(call.args)},
                **{k: ast.unparse(v) for k, v in _keywords(call).items()}}
    for before, after in zip(links, links[1:]):
        a, b = switches(before), switches(after)
        changed = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
        # dropping validation_split=0.15 is written as training the same 85 % without validating
        same_images = changed == {"validation", "share"} and b.get("share") == "0.85"
        assert len(changed) == 1 or same_images, (ast.unparse(before), ast.unparse(after))
