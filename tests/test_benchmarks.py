"""The training-throughput benchmark's configurations and its summary (its speed figures live in its JSON)."""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from course_utils import processes

spec = importlib.util.spec_from_file_location(
    "training_throughput", Path(__file__).resolve().parent.parent / "benchmarks" / "training_throughput.py")
bench = sys.modules["training_throughput"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
spec.loader.exec_module(bench)


def test_preset_starts_from_the_seeds_naive_run_and_adds_one_cure_at_a_time():
    configs = bench.preset("mixed_bfloat16")
    assert configs[0] == bench.Config(replicas=2, batch=64, input="naive", steps_per_execution=1, xla=False,
                                      precision="float32")
    two = [c for c in configs if c.replicas == 2]
    changed = [sum(a != b for a, b in zip(vars(x).values(), vars(y).values())) for x, y in zip(two, two[1:3])]
    assert changed == [1, 1]  # cache, then the larger batch
    assert {c.precision for c in configs} == {"float32", "mixed_bfloat16"} and any(c.xla for c in configs)
    assert any(c.replicas == 1 for c in configs) and len(set(configs)) == len(configs)


def test_grid_is_every_combination():
    args = bench.argparse.Namespace(replicas=[1, 2], batches=[64], input=["naive", "cached"], steps_per_execution=[1],
                                    xla=[False], precision=["float32", "mixed_bfloat16"], onednn=["default"])
    configs = bench.grid(args)
    assert len(configs) == 8 and len(set(configs)) == 8
    args.onednn = ["0", "1"]
    both = bench.grid(args)
    assert len(both) == 16 and len({c.label() for c in both}) == 16  # oneDNN off and on, told apart by label
    assert {c.label().split()[-1] for c in both} == {"onednn0", "onednn1"}
    assert "onednn" not in configs[0].label()


def test_child_env_sets_onednn_only_where_the_configuration_names_it():
    environ = {"PATH": "/bin", "TF_ENABLE_ONEDNN_OPTS": "0"}
    for onednn, expected in [("1", "1"), ("0", "0"), ("default", "0")]:
        env = bench.child_env({"config": asdict(bench.Config(onednn=onednn))}, environ)
        assert env["TF_ENABLE_ONEDNN_OPTS"] == expected and env["TF_CPP_MIN_LOG_LEVEL"] == "3"
    assert "TF_ENABLE_ONEDNN_OPTS" not in bench.child_env({"peak": True}, {"PATH": "/bin"})
    with pytest.raises(ValueError, match="default, 0 or 1"):
        bench.child_env({"config": {"onednn": "yes"}}, environ)


def test_a_child_process_gets_its_configurations_onednn_setting():
    shows = "import json, os; print('RESULT ' + json.dumps({'seen': os.environ.get('TF_ENABLE_ONEDNN_OPTS')}))"
    for onednn in ("0", "1"):
        child = bench.Child({"config": asdict(bench.Config(onednn=onednn))}, argv=[sys.executable, "-c", shows],
                            timeout=60)
        try:
            assert child.read_result() == {"seen": onednn}
        finally:
            child.close(grace=10)


def test_an_unknown_onednn_value_is_refused_with_the_values_it_takes(capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--onednn", "0,on"])
    assert exit_.value.code == 2 and "--onednn takes default, 0 and 1, not on" in capsys.readouterr().err


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


def test_preset_leaves_mixed_precision_out_where_the_policy_is_none_and_uses_the_policy_it_is_given():
    with_bf16, without = bench.preset("mixed_bfloat16"), bench.preset(None)
    assert {c.precision for c in without} == {"float32"}
    assert without == [c for c in with_bf16 if c.precision == "float32"] and len(without) == len(with_bf16) - 2
    fp16 = bench.preset("mixed_float16")
    assert [c.precision for c in fp16 if c.precision != "float32"] == ["mixed_float16"] * 2


def test_precisions_auto_stands_for_the_policy_and_names_given_are_kept():
    assert bench.precisions(None, None) == ["float32"]
    assert bench.precisions(None, "mixed_bfloat16") == ["float32", "mixed_bfloat16"]
    assert bench.precisions(["float32", "mixed_float16"], None) == ["float32", "mixed_float16"]
    assert bench.precisions(["auto", "float32", "mixed_bfloat16"], "mixed_bfloat16") == ["mixed_bfloat16", "float32"]


def test_learning_rate_scales_with_the_global_batch_from_1e_3_at_128():
    assert bench.learning_rate(128) == pytest.approx(1e-3)
    assert bench.learning_rate(512) == pytest.approx(4e-3) and bench.learning_rate(64) == pytest.approx(5e-4)
    with pytest.raises(ValueError, match="global_batch"):
        bench.learning_rate(0)


def test_machine_records_the_cpu_model_its_relevant_flags_and_the_software(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Fake Xeon 9000 @ 2.0GHz\n"
                       "flags\t\t: fpu sse2 fma avx2 avx512f amx_tile avx512_bf16 hypervisor\n\n"
                       "processor\t: 1\nmodel name\t: Fake Xeon 9000 @ 2.0GHz\nflags\t\t: fpu\n")
    software = {"tensorflow": "2.99.0", "keras": "3.99.0", "precision_policy": ["mixed_bfloat16", "it has bf16"]}
    found = bench.machine(software, cpuinfo=str(cpuinfo))
    assert found["cpu_model"] == "Fake Xeon 9000 @ 2.0GHz"
    assert found["cpu_flags"] == ["avx2", "avx512f", "avx512_bf16", "amx_tile", "fma"]  # CPU_FLAGS order
    assert (found["cpus"], found["python"]) == (os.cpu_count(), platform.python_version())
    assert (found["tensorflow"], found["keras"]) == ("2.99.0", "3.99.0")
    assert (found["precision_policy"], found["precision_policy_reason"]) == ("mixed_bfloat16", "it has bf16")
    assert "machine" in found  # the field earlier results have
    missing = bench.machine(software, cpuinfo=str(tmp_path / "absent"))
    assert missing["cpu_flags"] == [] and missing["cpu_model"] == (platform.processor() or platform.machine())


class FakeChild:
    """Stands for a configuration's process: scripted results, every call logged in one shared list."""

    def __init__(self, payload, script, log, busy):
        self.name, self.log, self.busy = payload["config"], log, busy
        self.results = iter(script[self.name])
        self.log.append(("start", self.name))
        self.busy.add(self.name)  # training its untimed epoch until its first result is read

    def send(self, command):
        self.log.append((command, self.name))
        if command == "epoch":
            assert not self.busy, f"{self.name} told to train while {self.busy} still is"
            self.busy.add(self.name)

    def read_result(self):
        self.busy.discard(self.name)
        got = next(self.results)
        if isinstance(got, BaseException):
            raise got
        return got

    def close(self, grace=0.0):
        self.log.append(("close", self.name))


def _fakes(script):
    log, busy = [], set()
    return log, (lambda payload: FakeChild(payload, script, log, busy))


def test_interleave_runs_warm_ups_one_at_a_time_then_one_epoch_per_configuration_per_round():
    warm = {"steps": 20, "warmup_images_per_s": 10.0}
    script = {"A": [warm, {"images_per_s": 1.0}, {"images_per_s": 2.0}, {"images_per_s": 3.0}],
              "B": [bench.ChildFailed("XLA cannot run here")],
              "C": [warm, {"images_per_s": 5.0}, bench.ChildFailed("killed")]}
    log, start = _fakes(script)
    lines = []
    found = bench.interleave({name: {"config": name} for name in "ABC"}, 3, start=start, report=lines.append)
    sent = [entry for entry in log if entry[0] in ("start", "epoch", "quit")]
    assert sent == [("start", "A"), ("start", "B"), ("start", "C"),
                    ("epoch", "A"), ("epoch", "C"), ("epoch", "A"), ("epoch", "C"), ("epoch", "A"), ("quit", "A")]
    assert {name for kind, name in log if kind == "close"} == {"A", "B", "C"}
    assert log.index(("quit", "A")) < log.index(("close", "A"))
    assert found["A"] == {**warm, "images_per_s": [1.0, 2.0, 3.0]}
    assert found["B"] == {"error": "XLA cannot run here"}
    assert found["C"]["error"] == "killed" and found["C"]["images_per_s_before_failure"] == [5.0]
    assert "images_per_s" not in found["C"] and "images_per_s" not in found["B"]
    assert any("fails in round 2: killed" in line for line in lines) and len(lines) == 3 + 1 + 3


def test_interleave_closes_every_child_on_an_interrupt():
    warm = {"steps": 20, "warmup_images_per_s": 10.0}
    log, start = _fakes({"A": [warm, {"images_per_s": 1.0}], "B": [warm, KeyboardInterrupt()], "C": [warm]})
    with pytest.raises(KeyboardInterrupt):
        bench.interleave({name: {"config": name} for name in "ABC"}, 2, start=start, report=lambda line: None)
    assert {name for kind, name in log if kind == "close"} == {"A", "B", "C"}
    assert not any(kind == "quit" for kind, _ in log)


# A stand-in for ``serve`` (no TensorFlow): it reports an untimed epoch, then one "epoch" per command.
SERVE = r"""
import json, sys, time
payload = json.loads(sys.argv[1])
if payload.get("fail"):
    sys.exit("ValueError: cannot build this configuration here")
print("some log line", flush=True)
print("RESULT " + json.dumps({"steps": 1, "warmup_images_per_s": 1.0}), flush=True)
n = 0
for line in sys.stdin:
    if line.strip() != "epoch":
        break
    n += 1
    with open(payload["log"], "a") as log:
        log.write(f"{payload['name']} {n}\n")
    print("RESULT " + json.dumps({"images_per_s": 100.0 * n + len(payload["name"])}), flush=True)
if payload.get("linger"):
    time.sleep(60)
"""


def test_interleave_with_real_processes_takes_turns_and_leaves_none_running(tmp_path):
    from course_utils import processes

    log, started = tmp_path / "epochs.log", []

    def start(payload):
        started.append(bench.Child(payload, argv=[sys.executable, "-c", SERVE], timeout=60))
        return started[-1]

    payloads = {name: {"name": name, "log": str(log), "fail": name == "bad"} for name in ("a", "bad", "ccc")}
    found = bench.interleave(payloads, 2, start=start, report=lambda line: None)
    assert log.read_text().split("\n") == ["a 1", "ccc 1", "a 2", "ccc 2", ""]
    assert found["a"]["images_per_s"] == [101.0, 201.0] and found["ccc"]["images_per_s"] == [103.0, 203.0]
    assert found["bad"] == {"error": "cannot build this configuration here"}
    assert [child.proc.returncode for child in started] == [0, 1, 0]  # "quit" ended the two that ran
    assert not {child.proc.pid for child in started} & set(processes.LIVE)


def test_a_child_is_stopped_while_it_waits_and_when_it_falls_silent(tmp_path):
    # "linger": it stays after its stdin closes, so that close must stop it
    waiting = bench.Child({"name": "w", "log": str(tmp_path / "log"), "linger": True},
                          argv=[sys.executable, "-c", SERVE])
    assert waiting.read_result() == {"steps": 1, "warmup_images_per_s": 1.0}
    waiting.close()
    assert waiting.proc.returncode is not None and waiting.proc.returncode != 0  # terminated, not finished
    silent = bench.Child({}, argv=[sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5)
    with pytest.raises(bench.ChildFailed, match="no result in"):
        silent.read_result()
    assert silent.proc.returncode is not None


@pytest.mark.parametrize("policy, precision, mixed", [(None, None, None), ("mixed_bfloat16", None, "mixed_bfloat16"),
                                                      (None, "float32,mixed_float16", "mixed_float16")])
def test_main_uses_the_policy_scales_the_learning_rate_and_records_the_machine(
        monkeypatch, tmp_path, policy, precision, mixed):
    why = "the reason for the policy"
    monkeypatch.setattr(bench, "_child", lambda payload: {
        "peak_flops": {"tensorflow_float32": 100e9, "numpy_float32": 90e9}, "training_flops": 80e6,
        "profiled_forward_flops": None,
        "software": {"tensorflow": "2.99", "keras": "3.99", "precision_policy": [policy, why]}})
    asked = {}

    def fake_interleave(payloads, rounds, start=None, report=print):
        asked.update(payloads, rounds=rounds)
        return {name: {"steps": 20, "warmup_images_per_s": 1.0, "images_per_s": [1000.0 + i, 990.0, 1010.0]}
                for i, name in enumerate(payloads)}

    monkeypatch.setattr(bench, "interleave", fake_interleave)
    monkeypatch.setattr(bench, "plot", lambda *args: None)
    out = tmp_path / "tt"
    argv = ["--repeats", "3", "--accuracy-epochs", "0", "--out", str(out)] + (["--precision", precision] if precision
                                                                               else [])
    assert bench.main(argv) == 0
    record = json.loads(out.with_suffix(".json").read_text())
    used = {r["config"]["precision"] for r in record["results"]}
    assert used == ({"float32", mixed} if mixed else {"float32"}) and asked["rounds"] == 3
    assert len(record["results"]) == (9 if mixed else 7)
    assert (record["mixed_precision_left_out"] is None) == bool(mixed)
    if not mixed:
        assert why in record["mixed_precision_left_out"]
    for r in record["results"]:
        batch = r["config"]["replicas"] * r["config"]["batch"]
        assert r["learning_rate"] == pytest.approx(1e-3 * batch / 128) and r["global_batch"] == batch
        assert r["median"] == sorted(r["images_per_s"])[1] and r["range"] == [990.0, max(r["images_per_s"])]
    assert (record["tensorflow"], record["keras"], record["precision_policy"]) == ("2.99", "3.99", policy)
    assert record["precision_policy_reason"] == why and isinstance(record["cpu_flags"], list)
    assert record["cpu_model"] and record["cpus"] == os.cpu_count() and record["interleaved"] is True


def test_the_readme_quotes_only_rates_that_are_in_the_committed_results():
    """Every "median (low-high)" images/s figure in benchmarks/README.md is a configuration's median and range
    in one of the committed training-throughput JSON files, rounded as printed."""
    import re

    root = Path(__file__).resolve().parent.parent / "benchmarks"
    quoted = re.findall(r"\| ([\d,]+) \(([\d,]+)-([\d,]+)\) \|", (root / "README.md").read_text())
    recorded = {(round(r["median"]), round(r["range"][0]), round(r["range"][1]))
                for path in (root / "results").glob("training_throughput*.json")
                for r in json.loads(path.read_text())["results"] if "median" in r}
    assert len(quoted) >= 8, "the README's tables were not found"
    missing = [q for q in quoted if tuple(int(v.replace(",", "")) for v in q) not in recorded]
    assert not missing, f"figures in benchmarks/README.md that no committed result holds: {missing}"


# -- iterator_teardown.py: whether each slow `del iterator` ends at a tuning round ----------------------------

teardown_spec = importlib.util.spec_from_file_location(
    "iterator_teardown", Path(__file__).resolve().parent.parent / "benchmarks" / "iterator_teardown.py")
teardown = importlib.util.module_from_spec(teardown_spec)
teardown_spec.loader.exec_module(teardown)

# The shape of a real child log (stop 38): three tuning threads, a deletion that begins with one of them
# logging a new sleep and ends when another's round falls due, then a quick deletion.
TEARDOWN_LOG = """\
MARK made 100.000
I0000 00:00:1000000101.000000   11 model.cc:2564] Waiting for 5120 ms.
I0000 00:00:1000000101.004000   12 model.cc:2564] Waiting for 5120 ms.
MARK del_start 1000000103.000
I0000 00:00:1000000103.002000   11 model.cc:2564] Waiting for 3118 ms.
I0000 00:00:1000000106.124000   12 model.cc:2564] Waiting for 10240 ms.
MARK del_end 1000000116.366
MARK made 1000000116.500
I0000 00:00:1000000117.000000   21 model.cc:2564] Waiting for 1280 ms.
MARK del_start 1000000117.900
MARK del_end 1000000117.903
"""


def test_teardown_analysis_finds_the_thread_that_slept_on_and_the_round_the_deletion_waited_for():
    slow, quick = teardown.analyse(TEARDOWN_LOG.splitlines())
    assert slow == {"seconds": 13.366, "slept_on_at_start": True, "end_to_nearest_round_s": 0.002, "tuning_threads": 2}
    assert quick["tuning_threads"] == 1  # counted anew after each deletion
    assert quick["seconds"] == 0.003 and not quick["slept_on_at_start"]
    assert quick["end_to_nearest_round_s"] == pytest.approx(0.377, abs=1e-3)  # thread 21's round: 118.28
    summary = teardown.summary([slow, quick])
    assert summary["slow"] == 1 and summary["slow_that_ended_at_a_scheduled_round"] == 1
    assert summary["slow_that_began_with_a_thread_sleeping_on"] == 1 and summary["fast_max_seconds"] == 0.003
    # no tuning thread at all (autotune off): nothing to set the deletions beside
    alone = teardown.analyse(["MARK del_start 1000000001.0", "MARK del_end 1000000001.004"])
    assert alone == [{"seconds": 0.004, "slept_on_at_start": False, "end_to_nearest_round_s": None,
                      "tuning_threads": 0}]
    with pytest.raises(ValueError, match="no Unix time"):
        teardown.analyse(["I1127 04:54:29.123456   11 model.cc:2564] Waiting for 10 ms."])
    with pytest.raises(ValueError, match="does not read"):  # a tuning line in another format is not skipped
        teardown.analyse(["2026-11-27 I tensorflow/core/framework/model.cc:2564] Waiting for 10 ms."])
    with pytest.raises(SystemExit):  # each setting once: two children of one setting would share a log
        teardown.main(["--autotune", "on,on"])


def test_teardown_waits_for_its_word_and_gives_up_on_a_child_that_hangs_or_ends():
    def child(code):
        return processes.Piped([sys.executable, "-c", code])

    talks = child("print('device notice'); print('ready', flush=True)")
    ends = child("print('something else')")
    hangs = child("import time; print('device notice', flush=True); time.sleep(60)")
    try:
        teardown._await(talks, "ready", "did not start", timeout=60)  # the notice passes
        with pytest.raises(RuntimeError, match="^did not start$"):
            teardown._await(ends, "ready", "did not start", timeout=60)
        started = time.perf_counter()
        with pytest.raises(RuntimeError, match=r"did not start \(no 'ready' line in 1 s\)"):
            teardown._await(hangs, "ready", "did not start", timeout=1)
        assert time.perf_counter() - started < 30  # not the child's 60 s
    finally:
        for each in (talks, ends, hangs):
            each.stop()
    assert hangs.next_line(timeout=10) is None  # its reader reached the end of the stream: no thread left reading
    assert not {each.proc.pid for each in (talks, ends, hangs)} & set(processes.LIVE)
    for bad in ("0", "-1", "inf"):
        with pytest.raises(SystemExit):
            teardown.main(["--timeout", bad])


@pytest.mark.notebook  # two TensorFlow child processes: slow
def test_teardown_benchmark_runs_both_settings_interleaved_and_leaves_no_child(tmp_path):
    out = tmp_path / "teardown.json"
    assert teardown.main(["--epochs", "2", "--limit", "512", "--output", str(out)]) == 0
    report = json.loads(out.read_text())
    on, off = report["autotune"]["on"], report["autotune"]["off"]
    assert len(on["deletions"]) == len(off["deletions"]) == 2  # one per epoch, each setting
    assert all(d["seconds"] >= 0 for d in on["deletions"] + off["deletions"])
    assert all(d["tuning_threads"] >= 1 for d in on["deletions"])  # its tuning threads log their sleeps
    # Autotuning off on the source dataset leaves the distributed iterator's per-device pipelines tuning
    # threads of their own (2 or 3 per epoch in the committed run). When this fails, TensorFlow has changed
    # that: update benchmarks/README.md and notebook 04's exercise on it.
    assert all(d["tuning_threads"] >= 1 for d in off["deletions"])
    import psutil  # noqa: PLC0415

    assert len(report["pids"]) == 2  # both children exited and were reaped
    assert not [p for p in report["pids"] if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
