"""tools/notebook_metadata.py: run metadata stripped, one wall time kept, README's wall-time sentence."""

import json

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tools import notebook_metadata as nm
from tools.notebook_params import ROOT, course_notebooks


def _papermill_notebook():
    papermill_cell = {"start_time": "2026-11-22T20:35:11.50+00:00", "end_time": "2026-11-22T20:35:11.51+00:00",
                      "duration": 0.01, "status": "completed", "exception": False}
    execution = {"iopub.execute_input": "2026-11-22T20:35:11.5Z", "shell.execute_reply": "2026-11-22T20:35:11.6Z"}
    nb = new_notebook(cells=[
        new_markdown_cell("# Title", metadata={"papermill": dict(papermill_cell), "tags": []}),
        new_code_cell("EPOCHS = 3", execution_count=1,
                      metadata={"tags": ["parameters"], "papermill": dict(papermill_cell),
                                "execution": dict(execution)}),
        new_code_cell("print('hi')", execution_count=2,
                      metadata={"papermill": dict(papermill_cell), "execution": dict(execution), "tags": []},
                      outputs=[new_output("stream", name="stdout", text="hi\n")]),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["papermill"] = {"duration": 155.6, "start_time": "x", "end_time": "y", "exception": None,
                                "input_path": "/a.ipynb", "output_path": "/a.ipynb", "parameters": {},
                                "environment_variables": {}, "version": "2.7.0"}
    return nb


def test_strip_run_metadata_keeps_outputs_and_one_wall_time():
    nb = _papermill_notebook()
    outputs = [c.get("outputs") for c in nb.cells]
    assert nm.strip_run_metadata(nb, 155.6)
    nbformat.validate(nb)
    assert nb.metadata == {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                           "course": {"wall_time_s": 156}}
    assert [c.metadata for c in nb.cells] == [{}, {"tags": ["parameters"]}, {}]  # empty tags go too
    assert [c.get("outputs") for c in nb.cells] == outputs
    assert [c.get("execution_count") for c in nb.cells] == [None, 1, 2]
    assert "papermill" not in nbformat.writes(nb) and "iopub" not in nbformat.writes(nb)
    assert not nm.strip_run_metadata(nb, 156.4), "same wall time: nothing to change"
    assert nm.strip_run_metadata(nb, None) and "course" not in nb.metadata


def test_the_machine_is_kept_with_the_wall_time_and_dropped_with_it():
    nb = _papermill_notebook()
    assert nm.strip_run_metadata(nb, 12.2, "AMD EPYC 9B14, 2 cores, no GPU")
    assert nb.metadata["course"] == {"wall_time_s": 12, "machine": "AMD EPYC 9B14, 2 cores, no GPU"}
    assert nm.keep_allowed_metadata(nb) == [], "the allowlist keeps it"
    assert nm.strip_run_metadata(nb, 12.2, "Intel Xeon, 8 cores, 1 GPU")
    assert nb.metadata["course"]["machine"] == "Intel Xeon, 8 cores, 1 GPU"
    assert nm.strip_run_metadata(nb, 12.2) and "machine" not in nb.metadata["course"], "a run that names none"
    nm.strip_run_metadata(nb, 12.2, "Intel Xeon, 8 cores, 1 GPU")
    assert nm.strip_run_metadata(nb, None) and "course" not in nb.metadata, "a failed run: both stale"


def test_machine_reads_what_strip_file_recorded(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(nbformat.writes(_papermill_notebook()))
    assert nm.machine(path) is None
    nm.strip_file(path, 6.2, "AMD EPYC 9B14, 2 cores, no GPU")
    assert nm.machine(path) == "AMD EPYC 9B14, 2 cores, no GPU" and nm.wall_time(path) == 6


def test_metadata_outside_the_allowlist_is_dropped_and_named():
    nb = _papermill_notebook()
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    nb.metadata["kernelspec"]["env"] = {"X": "1"}
    nb.metadata["widgets"] = {}
    nb.cells[1].metadata.update(collapsed=True, nbgrader={"grade": False}, ExecuteTime={"end_time": "x"})
    dropped = nm.keep_allowed_metadata(nb)
    assert "notebook metadata 'language_info'" in dropped and "notebook metadata kernelspec.env" in dropped
    assert "cell 0 metadata 'tags' (empty)" in dropped and "cell 1 metadata 'ExecuteTime'" in dropped
    assert set(nb.metadata) == {"kernelspec"} and set(nb.metadata["kernelspec"]) == {"name", "display_name", "language"}
    assert nb.cells[1].metadata == {"tags": ["parameters"], "nbgrader": {"grade": False}}
    assert nm.keep_allowed_metadata(nb) == []


def test_strip_file_writes_like_papermill(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(nbformat.writes(_papermill_notebook()))  # papermill: no final newline
    nm.strip_file(path, 6.2)
    text = path.read_text()
    assert not text.endswith("\n") and nm.wall_time(path) == 6
    assert nbformat.reads(text, as_version=4).cells[2].outputs[0].text == "hi\n"


def test_wall_time_sentence_and_readme_update(tmp_path):
    times = {"01": 6, "02": 156, "03": 409}
    machine = "AMD EPYC 9B14, 2 cores, no GPU"
    assert nm.wall_time_sentence(times, machine) == (
        "(on AMD EPYC 9B14, 2 cores, no GPU: 01 6 s, 02 156 s, 03 409 s; 571 s in all, under 10 minutes)")
    assert nm.wall_time_sentence({"01": 59}) == "(on the development machine: 01 59 s; 59 s in all, under a minute)"

    readme = tmp_path / "README.md"
    original = ("Times <!-- wall-times -->(on another machine: 01 1 s; 1 s in all, under a minute)"
                "<!-- /wall-times -->;\n")
    readme.write_text(original)
    assert nm.readme_machine(original) == "another machine"
    folder = tmp_path / "notebooks"
    folder.mkdir()
    paths = []
    for name, seconds in [("01_a.ipynb", 6.4), ("03_c.ipynb", 409), ("03b_d.ipynb", 9)]:
        nb = _papermill_notebook()
        nm.strip_run_metadata(nb, seconds, machine)
        nbformat.write(nb, folder / name)
        paths.append(folder / name)
    assert nm.wall_times(paths) == {"01": 6, "03": 409, "03b": 9}  # 03b is not 03
    assert nm.one_run_set(paths) == (machine, "")
    assert nm.update_readme(readme, paths)
    assert readme.read_text() == (f"Times <!-- wall-times -->(on {machine}: 01 6 s, 03 409 s, 03b 9 s; 424 s in all, "
                                  "under 8 minutes)<!-- /wall-times -->;\n")
    assert nm.readme_machine(readme.read_text()) == machine
    assert not nm.update_readme(readme, paths)


def test_the_readme_takes_wall_times_only_from_one_machines_run_of_every_notebook(tmp_path):
    readme = tmp_path / "README.md"
    original = "Times <!-- wall-times -->(on a machine: 01 1 s; 1 s in all, under a minute)<!-- /wall-times -->\n"
    readme.write_text(original)
    (tmp_path / "notebooks").mkdir()
    paths = []
    for name, seconds, machine in [("01_a.ipynb", 6, "AMD EPYC, 2 cores, no GPU"), ("02_b.ipynb", 7, None),
                                   ("03_c.ipynb", 8, "Intel(R) Xeon(R) CPU @ 2.20GHz, 4 cores, no GPU"),
                                   ("04_d.ipynb", None, None), ("05_e.ipynb", 9, "AMD EPYC, 2 cores, no GPU")]:
        nb = _papermill_notebook()
        nm.strip_run_metadata(nb, seconds, machine)
        nbformat.write(nb, tmp_path / "notebooks" / name)
        paths.append(tmp_path / "notebooks" / name)
    assert nm.one_run_set(paths) == (None, "no recorded run: 04; not run on AMD EPYC, 2 cores, no GPU: 02 (no "
                                           "machine recorded), 03 (Intel(R) Xeon(R) CPU @ 2.20GHz, 4 cores, no GPU)")
    assert not nm.update_readme(readme, paths) and readme.read_text() == original
    assert nm.one_run_set([paths[0], paths[4]]) == ("AMD EPYC, 2 cores, no GPU", "")
    assert nm.one_run_set([paths[1]]) == (None, "not run on one recorded machine: 02 (no machine recorded)")
    assert nm.update_readme(readme, [paths[0], paths[4]])
    assert nm.readme_machine(readme.read_text()) == "AMD EPYC, 2 cores, no GPU"


COURSE = course_notebooks()
COMMITTED_TIMES = nm.wall_times(COURSE)
RAN_ON, WHY_NOT = nm.one_run_set(COURSE)  # the committed notebooks' machine, read once for the tests below


def test_the_committed_notebooks_were_all_executed_on_one_machine():
    """Lessons, deeper notebooks and the solution: outcomes compare only within one machine's run."""
    assert RAN_ON, f"the committed notebooks are not one machine's run ({WHY_NOT}): run `python3 tasks.py course`"


def test_the_benchmarks_ran_on_the_notebooks_machine():
    assert RAN_ON, WHY_NOT
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        assert json.loads(path.read_text()).get("ran_on") == RAN_ON, \
            f"{path.name} was not measured on the notebooks' machine ({RAN_ON}): re-run its benchmark"


def test_readme_wall_times_equal_the_notebooks_metadata():
    readme = (ROOT / "README.md").read_text()
    assert RAN_ON, WHY_NOT
    assert nm.readme_sentence(readme) == nm.wall_time_sentence(COMMITTED_TIMES, RAN_ON), \
        "README's wall times differ from the notebooks' metadata: run `python3 tasks.py course`"
