"""The package itself: its docstring lists every module, once."""

from __future__ import annotations

import re
from pathlib import Path

import course_utils


def test_the_package_docstring_lists_every_module_once():
    root = Path(course_utils.__file__).parent
    modules = sorted([p.stem for p in root.glob("*.py") if not p.stem.startswith("_")]
                     + [p.parent.name for p in root.glob("*/__init__.py")])
    listed = re.findall(r":mod:`course_utils\.(\w+)`", course_utils.__doc__)
    assert sorted(listed) == modules
