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

DEEPER = ROOT / "notebooks" / "deeper" / "04_where_the_time_goes.ipynb"  # the chain of one-change runs
LESSON = ROOT / "notebooks" / "04_single_vs_multi_device.ipynb"  # the page's three runs and the parts between


def _parse(path):
    nb = nbformat.read(path, as_version=4)
    return ast.parse("\n".join(c.source for c in nb.cells if c.cell_type == "code" and not c.source.startswith("%")))


@pytest.fixture(scope="module")
def code():
    return _parse(DEEPER)


@pytest.fixture(scope="module")
def lesson():
    return _parse(LESSON)


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


def test_the_lesson_runs_the_pages_three_runs_as_the_page_did(lesson):
    pair = next(node for node in ast.walk(lesson) if isinstance(node, ast.Assign)
                and isinstance(node.targets[0], ast.Tuple) and ast.unparse(node.targets[0].elts[0]) == "GLOBAL")
    assert ast.unparse(pair.value.elts[0]) == "PER_REPLICA_BATCH * NUM_DEVICES"  # the page's 64 x its replicas
    assert ast.literal_eval(_assigned(lesson, "PER_REPLICA_BATCH")) == 64
    fit_run = _function(lesson, "fit_run")
    calls = [n for n in ast.walk(fit_run) if isinstance(n, ast.Call) and ast.unparse(n.func) == "model.fit"]
    on_arrays = _keywords(next(c for c in calls if ast.unparse(c.args[0]).startswith("train_images")))
    assert ast.unparse(on_arrays["batch_size"]) == "GLOBAL" and ast.unparse(on_arrays["validation_split"]) == "0.15"
    chain = {k: ast.unparse(v) for k, v in _chain(lesson, "CHAIN").items()}
    assert chain["ONE_PAGE"] == "fit_run(as_page_one_gpu=True)"  # arrays, 15 % validated, timer from the build
    assert chain["FIT_PAGE"] == "fit_run(mirrored, callbacks=True)"
    callbacks = ast.unparse(_function(lesson, "seed_callbacks"))
    for name in ("ModelCheckpoint", "TensorBoard", "LearningRateScheduler", "PrintLR"):
        assert name in callbacks
    loop = ast.unparse(_function(lesson, "seed_loop_run"))
    assert "if epoch % 2 == 0:" in loop and "shuffle(n_train).batch(GLOBAL)" in loop and "test_step(batch)" in loop
