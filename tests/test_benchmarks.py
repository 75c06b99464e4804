"""The training-throughput benchmark's configurations and its summary (its speed figures live in its JSON)."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location(
    "training_throughput", Path(__file__).resolve().parent.parent / "benchmarks" / "training_throughput.py")
bench = sys.modules["training_throughput"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
spec.loader.exec_module(bench)


def test_preset_starts_from_the_seeds_naive_run_and_adds_one_cure_at_a_time():
    configs = bench.preset()
    assert configs[0] == bench.Config(replicas=2, batch=64, input="naive", steps_per_execution=1, xla=False,
                                      precision="float32")
    two = [c for c in configs if c.replicas == 2]
    changed = [sum(a != b for a, b in zip(vars(x).values(), vars(y).values())) for x, y in zip(two, two[1:3])]
    assert changed == [1, 1]  # cache, then the larger batch
    assert {c.precision for c in configs} == {"float32", "mixed_bfloat16"} and any(c.xla for c in configs)
    assert any(c.replicas == 1 for c in configs) and len(set(configs)) == len(configs)


def test_grid_is_every_combination():
    args = bench.argparse.Namespace(replicas=[1, 2], batches=[64], input=["naive", "cached"], steps_per_execution=[1],
                                    xla=[False], precision=["float32", "mixed_bfloat16"])
    configs = bench.grid(args)
    assert len(configs) == 8 and len(set(configs)) == 8


def test_summary_gives_fractions_of_the_peak_ratios_and_keeps_failures():
    naive, fast = bench.Config(), bench.Config(input="cached", batch=256)
    bf16, broken = bench.Config(precision="mixed_bfloat16", batch=256), bench.Config(xla=True)
    results = [{"config": asdict(naive), "images_per_s": [900.0, 1000.0, 100.0]},
               {"config": asdict(fast), "images_per_s": [2000.0, 1900.0, 2100.0]},
               {"config": asdict(broken), "error": "Trying to access resource located in device CPU:1"},
               {"config": asdict(bf16), "images_per_s": [3000.0, 3000.0, 3100.0]}]
    measured = {"peak_flops": {"tensorflow_float32": 190e9, "numpy_float32": 200e9, "tensorflow_bfloat16": 400e9},
                "training_flops": 80e6}
    rows, headline = bench.summarize(results, measured)
    assert headline["fp32_peak_flops"] == 200e9 and headline["naive_images_per_s"] == 900.0  # medians
    assert headline["best_fp32"] == fast.label() and headline["best_fp32_fraction_of_peak"] == pytest.approx(0.8)
    assert headline["best"] == bf16.label() and headline["best_over_best_fp32"] == pytest.approx(1.5)
    assert headline["best_over_naive"] == pytest.approx(3000 / 900)
    assert any("fails here: Trying to access" in row for row in rows) and len(rows) == 5
    assert " 80%" in next(row for row in rows if row.startswith(fast.label()))


def test_a_failing_configuration_is_recorded_with_tensorflows_status_line(monkeypatch):
    stderr = ("Traceback (most recent call last):\n  File \"x.py\", line 1\n"
              "tensorflow.python.framework.errors_impl.InvalidArgumentError: Graph execution error:\n\n"
              "Detected at node StatefulPartitionedCall defined at (most recent call last):\n"
              "  File \"keras/trainer.py\", line 399, in fit\n\n\n"
              "Trying to access resource cnn/conv1/kernel/replica_1 located in CPU:1 from CPU:0\n"
              "\t [[{{node StatefulPartitionedCall}}]]\n")
    done = bench.subprocess.CompletedProcess([], 1, stdout="", stderr=stderr)
    monkeypatch.setattr(bench.subprocess, "run", lambda *a, **k: done)
    found = bench._child({"config": asdict(bench.Config(xla=True)), "steps": 1, "repeats": 1, "limit": 1})
    assert found["error"].startswith("Trying to access resource cnn/conv1/kernel/replica_1")
    with pytest.raises(RuntimeError, match="measuring the peak failed"):
        bench._child({"peak": True})


def test_failure_reasons_in_tensorflows_other_formats():
    several = "InvalidArgumentError: Graph execution error:\n\n2 root error(s) found.\n  (0) INVALID_ARGUMENT:  x\n"
    assert bench._reason("ValueError: batch must be positive\n") == "batch must be positive"
    assert bench._reason("Killed\n") is None
    assert bench._reason(several) == "2 root error(s) found."
