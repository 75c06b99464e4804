"""notebook_files: the files a notebook's %%writefile cells write, as IPython writes them."""

import json
from pathlib import Path

import pytest

from course_utils import notebook_files


def notebook(tmp_path, *sources):
    cells = [{"cell_type": "code", "source": s, "metadata": {}, "outputs": [], "execution_count": None}
             for s in sources]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_writefile_and_appends_in_cell_order(tmp_path):
    path = notebook(tmp_path, "%%writefile w/a.py\nx = 1", "print('not a file')",
                    ["%%writefile -a w/a.py\n", "\n", "y = 2\n"], "%%writefile b.txt\nhello",
                    "%%writefile w/a.py\nz = 3")  # a plain %%writefile starts the file again
    assert notebook_files.writefile_cells(path) == {"w/a.py": "z = 3\n", "b.txt": "hello\n"}
    path = notebook(tmp_path, "%%writefile w/a.py\nx = 1", "%%writefile -a w/a.py\n\ny = 2\n")
    target = notebook_files.write(path, "w/a.py", into=tmp_path / "out")
    assert target == tmp_path / "out" / "w" / "a.py" and target.read_text() == "x = 1\n\ny = 2\n"


def test_a_file_the_notebook_does_not_write_is_named_in_the_error(tmp_path):
    path = notebook(tmp_path, "%%writefile a.py\nx = 1")
    with pytest.raises(KeyError, match="writes no file 'b.py'; it writes: a.py"):
        notebook_files.write(path, "b.py")


@pytest.mark.parametrize("folder", ["notebooks", "solutions", "exercises", "notebooks/deeper"])
def test_a_run_directory_is_beside_the_lesson_folders_fresh_and_relative(tmp_path, monkeypatch, folder):
    (tmp_path / folder).mkdir(parents=True)
    monkeypatch.chdir(tmp_path / folder)
    first = notebook_files.fresh_run_directory("02_fit")
    up = "../" * len(Path(folder).parts)  # a deeper notebook's runs go to the same runs/ as its lesson's
    assert first == Path(f"{up}runs/02_fit") and (tmp_path / "runs" / "02_fit").is_dir()
    (first / "ckpt_01.weights.h5").write_text("an old run's")
    again = notebook_files.fresh_run_directory("02_fit")
    assert again == first and not any(again.iterdir()), "emptied: the latest checkpoint is this run's"


def test_nbval_staged_copies_print_the_same_relative_paths(tmp_path, monkeypatch):
    staged = tmp_path / "build" / "nbval" / "notebooks"  # tools/stage_nbval.py's layout
    staged.mkdir(parents=True)
    monkeypatch.chdir(staged)
    assert notebook_files.fresh_run_directory("02_fit") == Path("../runs/02_fit")
    assert (tmp_path / "build" / "nbval" / "runs" / "02_fit").is_dir()


def test_outside_the_lesson_folders_runs_go_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # Colab: /content
    assert notebook_files.fresh_run_directory("07_svhn") == Path("runs/07_svhn")
    assert (tmp_path / "runs" / "07_svhn").is_dir()


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../escape"])
def test_a_run_directory_name_is_a_plain_name(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="plain folder name"):
        notebook_files.fresh_run_directory(name)
