"""The house rules of course_utils: small modules, short functions, no import cycle, no blanket noqa."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.versionless  # the oldest-versions check skips it: see pyproject's markers

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "course_utils"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 300, 60


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_is_small(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.name} has {lines} lines (at most {MAX_MODULE_LINES}): split it by concern"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_functions_are_short(path):
    tree = ast.parse(path.read_text())
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})" for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines in {path.name}: {', '.join(long)}"


def imports_of(path: Path) -> set[str]:
    """The course_utils modules ``path`` imports (at any depth: lazy imports count too)."""
    found, here = set(), module_name(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}  # "from course_utils import x"
    known = {module_name(p) for p in MODULES}
    return {name for name in found if name in known and name != here and not here.startswith(name + ".")}


def test_no_import_cycle():
    graph = {module_name(p): imports_of(p) for p in MODULES}
    for start in graph:  # depth-first from every module; a path back to the start is a cycle
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                assert nxt != start, f"import cycle: {' -> '.join([*path, nxt])}"
                if nxt not in path:
                    stack.append((nxt, [*path, nxt]))


def test_the_cycle_check_sees_a_cycle(tmp_path, monkeypatch):
    """The check above is not vacuous: two modules importing each other are found."""
    (tmp_path / "course_utils").mkdir()
    a, b = tmp_path / "course_utils" / "a.py", tmp_path / "course_utils" / "b.py"
    a.write_text("from course_utils import b\n")
    b.write_text("def f():\n    from course_utils.a import x\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "MODULES", [a, b])
    with pytest.raises(AssertionError, match="course_utils.a -> course_utils.b -> course_utils.a"):
        test_no_import_cycle()


@pytest.mark.parametrize("path", [*MODULES, *sorted((ROOT / "tools").glob("*.py")), ROOT / "tasks.py"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_blanket_noqa(path):
    blanket = [i for i, line in enumerate(path.read_text().splitlines(), 1)
               if re.search(r"#\s*noqa(?!:\s*[A-Z]+\d+)", line, re.I)]
    assert not blanket, f"{path.name}: a noqa without a rule code on lines {blanket}"
