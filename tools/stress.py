"""Run the tests that race the machine N times while K busy loops load its cores; print failures per test.

    python -m tools.stress [--rounds N] [--load K] [TEST ...]

Without TESTs: every test that starts processes (launchers, servers, workers, Slurm, network namespaces,
the utilisation monitor, the batch scripts) and the smoke runs of notebooks 05, 05b, 06 and 08 and their deeper
notebooks. Each round is one pytest run (JUnit XML kept in build/stress/); the K busy loops run for the
whole command and are stopped, by their process groups, on success, failure and Ctrl-C. Exit status 1 when
any test failed in any round.
Long (about 23 minutes a round on 2 cores): not part of ``tasks.py test``.
"""

from __future__ import annotations

import argparse
import os
import queue
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from course_utils import processes
from tools.notebook_params import ROOT

MULTI_PROCESS_TESTS = [
    "tests/test_cluster.py", "tests/test_servers.py", "tests/test_worker_exit.py", "tests/test_interrupt_windows.py",
    "tests/test_multi_worker_scripts.py", "tests/test_parameter_servers.py", "tests/test_netlab.py",
    "tests/test_slurm.py", "tests/test_monitor.py", "tests/test_cluster_files.py",
]
SMOKE_RUNS = [f"tests/test_notebooks.py::test_runs_in_smoke_setting[notebooks/{name}.ipynb]"
              for name in ("05_multi_worker", "05b_network_links", "06_parameter_servers", "08_slurm",
                           "deeper/05_multi_worker_inside", "deeper/05b_network_links_inside",
                           "deeper/06_parameter_servers_inside", "deeper/08_slurm_checks")]
BUSY_LOOP = "while True: pass"


def outcomes(junit_xml: Path) -> dict[str, str]:
    """``{test id: "passed" | "failed" | "skipped"}`` from a JUnit XML report (errors count as failed)."""
    found = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        found[name] = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
    return found


def summary(rounds: list[dict[str, str]]) -> tuple[str, int]:
    """A table of the tests that failed at least once, and the number of failed (test, round) pairs."""
    failed: dict[str, int] = defaultdict(int)
    tests: set[str] = set()
    for found in rounds:
        tests |= set(found)
        for name, outcome in found.items():
            failed[name] += outcome == "failed"
    rows = [f"{count}/{len(rounds)} rounds failed: {name}" for name, count in sorted(failed.items()) if count]
    total = sum(failed.values())
    head = (f"{len(tests)} tests x {len(rounds)} rounds: {total} failures"
            + ("" if rows else " (no test failed in any round)"))
    return "\n".join([head, *rows]), total


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="pytest runs (default 3)")
    parser.add_argument("--load", type=int, default=2, help="busy loops on the cores meanwhile (default 2)")
    parser.add_argument("--load-nice", type=int, default=0, choices=range(20), metavar="0-19",
                        help="the busy loops' niceness (default 0: they compete with the tests, as a busy machine's "
                             "other work would; 19: they take only idle time, as this tool's own tests want)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "stress", help="where the JUnit reports go")
    parser.add_argument("tests", nargs="*", help="pytest node ids (default: the multi-process tests and smoke runs)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.load < 0:
        parser.error("--rounds must be at least 1 and --load at least 0")
    tests = args.tests or [*MULTI_PROCESS_TESTS, *SMOKE_RUNS]
    args.out.mkdir(parents=True, exist_ok=True)
    nice = ["nice", "-n", str(args.load_nice)] if args.load_nice else []  # nice execs: the loop keeps its command line
    loops = [processes.start([*nice, sys.executable, "-c", BUSY_LOOP], env={"PATH": os.environ.get("PATH", "")},
                             log_path=args.out / f"load-{i}.log",
                             lines=queue.Queue())[0] for i in range(args.load)]
    results = []
    try:
        for round_ in range(1, args.rounds + 1):
            report = args.out / f"round{round_}.xml"
            start = time.perf_counter()
            print(f"[stress] round {round_}/{args.rounds}, {args.load} busy loops: {len(tests)} test selections",
                  flush=True)
            subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                            f"--junitxml={report}", *tests], cwd=ROOT, check=False)
            if not report.exists():
                print(f"[stress] round {round_}: pytest wrote no report", flush=True)
                return 1
            results.append(outcomes(report))
            failed = sum(outcome == "failed" for outcome in results[-1].values())
            print(f"[stress] round {round_}: {failed} failed, {time.perf_counter() - start:.0f} s", flush=True)
    finally:
        processes.stop(loops, grace=1.0)
    text, total = summary(results)
    print("[stress] " + text.replace("\n", "\n[stress] "), flush=True)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
