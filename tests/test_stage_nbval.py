"""tools/stage_nbval.py: the notebooks nbval runs, in the smoke setting, with nbval's output wait lengthened."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import nbval.plugin

from tools import nbval_conftest, stage_nbval
from tools.notebook_params import course_notebooks


def test_stages_every_notebook_and_the_conftest(tmp_path):
    assert stage_nbval.main([str(tmp_path)]) == 0
    staged = sorted(p.name for p in tmp_path.rglob("*.ipynb"))
    assert staged == sorted(p.name for p in course_notebooks())
    assert (tmp_path / "conftest.py").read_text() == (stage_nbval.Path(nbval_conftest.__file__)).read_text()


def test_the_conftest_lengthens_nbvals_output_wait():
    # nbval sets this attribute on each cell item (a fixed 5 s): when nbval renames it, this fails
    assert "self.output_timeout = 5" in inspect.getsource(nbval.plugin.IPyNbCell.__init__)
    cell, other = SimpleNamespace(output_timeout=5), SimpleNamespace()
    nbval_conftest.pytest_collection_modifyitems([cell, other])
    assert cell.output_timeout == nbval_conftest.OUTPUT_TIMEOUT_S == 120 and not hasattr(other, "output_timeout")
