"""notebook_files: the files a notebook's %%writefile cells write, as IPython writes them."""

import json

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
