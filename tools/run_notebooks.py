"""Execute the course's notebooks with papermill, a progress line per notebook.

    python -m tools.run_notebooks               # all notebooks, default parameters, in place
    python tools/run_notebooks.py 02 03           # only notebooks whose name contains 02 or 03
    python tools/run_notebooks.py --smoke --output-dir build/smoke

Each executed notebook is stripped of papermill's run metadata (timestamps, paths) and keeps its
wall time as ``metadata.course.wall_time_s`` and the machine it ran on as ``metadata.course.machine``
(each code cell's time goes to build/course-cell-times.json, the three longest into the progress line);
after an in-place run in which no notebook failed, README.md's wall-time sentence is regenerated from
the wall times, when every notebook's recorded run is from this one machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import nbformat
import papermill as pm

from course_utils import machine
from tools.notebook_metadata import label, one_run_set, strip_file, update_readme
from tools.notebook_params import ROOT, course_notebooks, smoke_parameters

CELL_TIMES = "course-cell-times.json"  # in build/ (or --output-dir): each notebook's code cells, longest first


def cell_times(path: Path) -> list[tuple[int, float, str]]:
    """``(code cell number, seconds, first line)`` of an executed notebook's code cells, longest first (papermill's
    per-cell durations, read before the run metadata is stripped; cell 1 is the parameters cell)."""
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    found = [(n, round(c.metadata.get("papermill", {}).get("duration") or 0.0, 1), c.source.split("\n", 1)[0][:60])
             for n, c in enumerate(cells, 1)]
    return sorted(found, key=lambda t: -t[1])



def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("select", nargs="*", help="run only notebooks whose file name contains one of these")
    parser.add_argument("--smoke", action="store_true", help="use the fast CI parameters")
    parser.add_argument("--output-dir", type=Path, help="write executed copies here instead of in place")
    args = parser.parse_args(argv)

    notebooks = [p for p in course_notebooks() if not args.select or any(s in p.name for s in args.select)]
    if not notebooks:
        print("No notebook matches", args.select, file=sys.stderr)
        return 2
    # The kernels inherit this environment: a non-interactive MPLBACKEND (Agg) would make every
    # figure vanish from the notebooks' outputs. Kernels pick matplotlib's inline backend without it.
    os.environ.pop("MPLBACKEND", None)
    failures, timings = [], {}
    ran_on = machine.describe()  # recorded in each notebook's metadata: outcomes compare only within one machine
    print(f"on {ran_on}", flush=True)
    total = time.perf_counter()
    for i, path in enumerate(notebooks, 1):
        rel = path.relative_to(ROOT)
        params = smoke_parameters(path) if args.smoke else {}
        out = path if args.output_dir is None else args.output_dir / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        print(f"[{i}/{len(notebooks)}] {rel} ...", flush=True)
        start = time.perf_counter()
        try:
            pm.execute_notebook(str(path), str(out), parameters=params, cwd=str(path.parent),
                                progress_bar=False, log_output=False)
        except pm.PapermillExecutionError as err:
            failures.append(rel)
            strip_file(out, None)
            print(f"[{i}/{len(notebooks)}] {rel} FAILED after {time.perf_counter() - start:.0f} s: "
                  f"{err.ename}: {err.evalue} (see {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out})",
                  flush=True)
            continue
        seconds = time.perf_counter() - start
        longest = cell_times(out)
        timings[label(path)] = {"wall_time_s": round(seconds), "cells": longest}
        strip_file(out, seconds, ran_on)
        print(f"[{i}/{len(notebooks)}] {rel} done in {seconds:.0f} s; longest code cells: "
              + ", ".join(f"{n} {t:.0f} s" for n, t, _ in longest[:3]), flush=True)
    times_path = (args.output_dir or ROOT / "build") / CELL_TIMES
    times_path.parent.mkdir(parents=True, exist_ok=True)
    times_path.write_text(json.dumps({"machine": ran_on, "notebooks": timings}, indent=1) + "\n")
    print(f"{len(notebooks) - len(failures)} of {len(notebooks)} notebooks ran in "
          f"{time.perf_counter() - total:.0f} s" + (f"; failed: {', '.join(map(str, failures))}" if failures else ""))
    if failures:
        return 1
    if args.output_dir is None and not args.smoke:
        if update_readme(ROOT / "README.md", course_notebooks()):
            print("README.md: wall times updated from the notebooks' metadata")
        elif why := one_run_set(course_notebooks())[1]:  # the README's times come from one machine's run only
            print(f"README.md: wall times left as they are ({why}); "
                  "`python3 tasks.py course` with no selection runs them all here")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
