"""Notebook 05's worker scripts, run as the notebook writes them, on a real two-worker cluster."""

from __future__ import annotations

import re

import nbformat
import pytest

from tools.notebook_params import ROOT

NOTEBOOK = ROOT / "notebooks" / "05_multi_worker.ipynb"


def write_scripts(directory) -> dict[str, object]:
    """Every ``%%writefile [-a] workers/<name>`` cell of notebook 05, assembled as the notebook does."""
    scripts: dict[str, str] = {}
    for cell in nbformat.read(NOTEBOOK, as_version=4).cells:
        match = re.match(r"%%writefile (-a )?workers/(\S+)\n", cell.source)
        if cell.cell_type == "code" and match:
            append, name = match.groups()
            body = cell.source[match.end():]
            scripts[name] = scripts[name] + body if append else body
    paths = {}
    for name, text in scripts.items():
        paths[name] = directory / name
        paths[name].write_text(text + "\n")
    return paths


def test_notebook_writes_its_worker_scripts(tmp_path):
    scripts = write_scripts(tmp_path)
    assert set(scripts) == {"who_am_i.py", "mwms_custom_loop.py", "mwms_fit.py"}
    for path in scripts.values():
        compile(path.read_text(), str(path), "exec")  # each assembled script is valid Python


@pytest.mark.notebook
def test_interrupt_during_training_leaves_nothing_running_and_the_chiefs_checkpoints_intact(
        tmp_path, notebook_data_env):
    """Ctrl-C (a Jupyter interrupt) in the middle of epoch 2 of notebook 05's fit script on two workers,
    after epoch 1's checkpoint.

    Epochs of 64 steps of 64 images per worker (about 50 ms each on one thread here): the interrupt, sent
    at step 2, lands seconds before the epoch's checkpoint is written, even on a loaded machine (an
    interrupted save would leave tf_keras's ``workertemp_*`` directories, not what this test is about).
    Smaller batches would not help: their steps are faster, and in CI batch 8 let all 128 steps pass."""
    import _thread
    import threading
    import time

    import psutil

    from course_utils import cluster

    script, logs, out = write_scripts(tmp_path)["mwms_fit.py"], tmp_path / "logs", tmp_path / "out"

    def interrupt_in_epoch_2():
        chief_log, deadline = logs / "worker-0.log", time.monotonic() + 240
        while time.monotonic() < deadline:
            if chief_log.exists() and "epoch 2 step 2" in chief_log.read_text():
                _thread.interrupt_main()
                return
            time.sleep(0.1)

    threading.Thread(target=interrupt_in_epoch_2, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        # stop_grace=1: the strategy installs TensorFlow's own SIGTERM handler (it watches for preemption), so
        # the launcher's SIGTERM does not end a worker; its SIGKILL does, after the grace (default 5 s)
        cluster.run(script, workers=2, threads=1, show="quiet", env=notebook_data_env, log_dir=logs, timeout=300,
                    stop_grace=1, args=["--epochs", 30, "--limit", 8192, "--per-worker-batch", 64, "--test-limit", 128,
                          "--out", out])
    reached = [line for line in (logs / "worker-1.log").read_text().splitlines() if line.startswith("epoch ")]
    epoch, step = (int(n) for n in reached[-1].split()[1::2][:2])
    assert (epoch, step) < (2, 64), f"the interrupt came only after epoch 2's checkpoint ({reached[-1]})"
    assert psutil.Process().children(recursive=True) == []
    assert not list(logs.glob("tasks-tmp-*")), "the tasks' temporary directories were left behind"
    left = [p for p in out.rglob("*") if "temp" in p.name]
    assert not left, f"temporary directories of the other worker were left behind: {left}"
    checkpoints = sorted((out / "checkpoints").glob("epoch-*.weights.h5"))
    assert [p.name for p in checkpoints][:1] == ["epoch-01.weights.h5"]
    import tf_keras as keras  # the script's Keras, and its model: every checkpoint loads completely

    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(32, 3, activation="relu"),
                              keras.layers.Conv2D(64, 3, activation="relu"), keras.layers.Flatten(),
                              keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
    for path in checkpoints[:1]:  # a later one may have been cut short by the interrupt
        before = [w.copy() for w in model.get_weights()]
        model.load_weights(path)
        assert all((a != b).any() for a, b in zip(model.get_weights(), before) if a.size > 1)


@pytest.mark.notebook
def test_the_fit_worker_asked_to_stop_backs_up_exits_85_and_the_next_run_resumes_there(tmp_path, notebook_data_env):
    """USR1 (the Slurm batch script's warning before the time limit) to worker 1 alone, in epoch 2: at the next
    backup (every 4 steps) every worker learns of it through an all-reduce, and both exit with 85 (the code the
    batch scripts requeue on). Run again with the same --out, the workers resume at the step after that backup
    and finish the job. 8 steps an epoch: backups after steps 4 and 8 of epoch 1, then step 4 of epoch 2."""
    import json
    import signal
    import threading
    import time

    import psutil

    from course_utils import cluster

    script, out = write_scripts(tmp_path)["mwms_fit.py"], tmp_path / "out"
    args = ["--epochs", 3, "--limit", 1024, "--per-worker-batch", 64, "--test-limit", 128, "--backup-every", 4,
            "--out", out]

    def warn_worker_1_in_epoch_2(log):
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if log.exists() and "epoch 2 step 2" in log.read_text():
                for child in psutil.Process().children(recursive=True):
                    try:
                        config = json.loads(child.environ().get("TF_CONFIG", "{}"))
                    except psutil.Error:
                        continue
                    if config.get("task") == {"type": "worker", "index": 1} and str(script) in child.cmdline():
                        child.send_signal(signal.SIGUSR1)
                        return
            time.sleep(0.05)

    warner = threading.Thread(target=warn_worker_1_in_epoch_2, args=(tmp_path / "first" / "worker-1.log",))
    warner.start()
    first = cluster.run(script, workers=2, threads=1, show="quiet", check=False, env=notebook_data_env,
                        log_dir=tmp_path / "first", timeout=300, args=args)
    warner.join()
    assert [t.returncode for t in first.tasks] == [85, 85], first.tasks[0].last_lines(30)
    said = [line for t in first.tasks for line in t.last_lines(40) if "backed up at" in line]
    assert said == ["worker 0: backed up at epoch 2 step 4, exits for a requeue",
                    "worker 1: backed up at epoch 2 step 4, exits for a requeue"], said
    assert not (out / "test.json").exists(), "the first run stopped before it finished"

    second = cluster.run(script, workers=2, threads=1, show="quiet", env=notebook_data_env,
                         log_dir=tmp_path / "second", timeout=300, args=args)
    steps = [line for line in second.tasks[0].log_path.read_text().splitlines() if line.startswith("epoch ")]
    assert steps[0] == "epoch 2 step 5", f"resumed at {steps[0]}, not after the backup"
    assert steps[-1] == "epoch 3 step 8" and json.loads((out / "test.json").read_text())["test_accuracy"] > 0
    assert psutil.Process().children(recursive=True) == []


@pytest.mark.notebook
def test_the_custom_loop_saves_at_each_epochs_end_and_a_rerun_resumes_there(tmp_path, notebook_data_env):
    """A node failure sends no signal, so the custom loop also saves at each epoch's end (every worker; the
    chief's copy is kept). Run again with the same --out (a requeued job), it resumes after that epoch and
    prints the same "resuming at step N" line as after a signalled save. 256 examples, 2 x 32: 4 steps."""
    from course_utils import cluster

    script, out = write_scripts(tmp_path)["mwms_custom_loop.py"], tmp_path / "out"
    args = ["--limit", 256, "--per-worker-batch", 32, "--out", out]
    for epochs, logs in [(1, "first"), (2, "second")]:
        run = cluster.run(script, workers=2, threads=1, show="quiet", env=notebook_data_env,
                          log_dir=tmp_path / logs, timeout=300, args=["--epochs", epochs, *args])
        assert run.ok, run.table()
        assert sorted(p.name for p in (out / "checkpoint").glob("ckpt-*.index")) == [f"ckpt-{4 * epochs}.index"]
    text = (tmp_path / "second" / "worker-0.log").read_text()
    assert "worker 0: resuming at step 4" in text
    assert "epoch 1:" not in text and "epoch 2: 4 steps" in text
