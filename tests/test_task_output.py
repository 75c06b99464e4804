"""course_utils.cluster._output: TensorFlow's log noise, progress lines, the status board."""

import pytest

from course_utils.cluster import _output as task_output
from course_utils.cluster._output import NOISE, Progress, StatusBoard


@pytest.mark.parametrize("line", [
    "I0000 00:00:1795414282.275369    4377 port.cc:153] oneDNN custom operations are on.",
    "E0000 00:00:1795414285.407506    4377 cuda_platform.cc:52] failed call to cuInit: INTERNAL",
    "W0521 12:34:56.789012   12345 grpc_server_lib.cc:42] something",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "2024-01-01 12:00:00.123456: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on.",
    "2024-01-01 12:00:00.123456: W tensorflow/core/framework/op_kernel.cc:1839] OP_REQUIRES failed",
    "Additional GRPC error information from remote target /job:worker/replica:0/task:1:",
    ":{UNKNOWN:Error received from peer  {grpc_status:14, grpc_message:\"Socket closed\"}",
    "",
    "   ",
])
def test_noise_matches_tensorflow_log_lines(line):
    assert NOISE.search(line)


@pytest.mark.parametrize("line", [
    "epoch 1 step 3 loss 0.5",
    "Epoch 3/5",
    "Traceback (most recent call last):",
    '  File "/tmp/train.py", line 12, in <module>',
    "    raise ValueError('boom')",
    "ValueError: boom",
    "tensorflow.python.framework.errors_impl.UnavailableError: Socket closed",
    "I0000 is not a log line",
    "2024-01-01 this is a date",
])
def test_noise_keeps_what_people_need(line):
    assert not NOISE.search(line)


def test_progress_reads_epoch_and_step():
    p = Progress()
    assert p.describe() == "no progress yet"
    assert not p.update("loss 0.5") and (p.epoch, p.step) == (None, None)
    assert p.update("epoch 2 step 10 loss 0.5") and (p.epoch, p.step) == (2, 10)
    assert p.describe() == "epoch 2 step 10"
    assert not p.update("epoch 2 step 10 loss 0.4")  # nothing changed
    assert p.update("step=11") and p.describe() == "epoch 2 step 11"
    assert not p.update("epoch 2")  # the same epoch keeps its step
    assert p.step == 11


def test_progress_keras_epochs_reset_the_step():
    p = Progress()
    assert p.update("Epoch 3/5") and p.describe() == "epoch 3"
    assert p.update("STEP: 4") and p.describe() == "epoch 3 step 4"
    # Keras progress bars and option names are not steps.
    for line in ("4/10 [=======>......] - ETA: 0s - loss: 0.5", "10/10 [====] - 1s 5ms/step - loss: 0.3",
                 "steps_per_epoch=10", "stepping out"):
        assert not p.update(line), line
    assert p.update("Epoch 4/5") and (p.epoch, p.step) == (4, None)
    assert p.describe() == "epoch 4"
    assert Progress(step=3).describe() == "step 3"
    assert Progress(epoch=0, step=0).describe() == "epoch 0 step 0"


class FakeClock:
    def __init__(self, now):
        self.now = now

    def monotonic(self):
        return self.now


def test_status_board_prints_outside_jupyter(capsys, monkeypatch):
    clock = FakeClock(1000.0)
    monkeypatch.setattr(task_output, "time", clock)
    board = StatusBoard(["worker 0", "worker 10"], every_s=10)
    assert board.text() == "worker 0  | waiting\nworker 10 | waiting"
    assert capsys.readouterr().out == ""
    board.update("worker 0", "epoch 1")
    assert capsys.readouterr().out == "worker 0  | epoch 1\nworker 10 | waiting\n"
    clock.now += 1
    board.update("worker 10", "epoch 1")  # within every_s: not printed yet
    assert capsys.readouterr().out == ""
    clock.now += 10
    board.update("worker 10", "epoch 2")
    assert capsys.readouterr().out == "worker 0  | epoch 1\nworker 10 | epoch 2\n"
    clock.now += 30
    board.update("worker 10", "epoch 2")  # unchanged: not printed again
    assert capsys.readouterr().out == ""
    board.update("worker 0", "done")
    assert capsys.readouterr().out == "worker 0  | done\nworker 10 | epoch 2\n"
    clock.now += 1
    board.update("worker 10", "done")
    board.note("[launcher] a note")
    assert capsys.readouterr().out == "[launcher] a note\n"
    board.close()  # the final state, whatever the time
    board.close()  # and only once
    assert capsys.readouterr().out == "worker 0  | done\nworker 10 | done\n"


def test_status_board_disabled_prints_nothing(capsys):
    board = StatusBoard(["worker 0"], enabled=False)
    board.update("worker 0", "epoch 1")
    board.note("a note")
    board.close()
    assert capsys.readouterr().out == "" and board.lines == {"worker 0": "epoch 1"}


def test_status_board_first_change_is_printed_on_a_fresh_clock(capsys, monkeypatch):
    monkeypatch.setattr(task_output, "time", FakeClock(3.0))
    StatusBoard(["worker 0"], every_s=10).update("worker 0", "epoch 1")
    assert capsys.readouterr().out == "worker 0 | epoch 1\n"
