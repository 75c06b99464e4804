"""The student's path in a real browser: `python3 tasks.py lab`'s server, JupyterLab in Debian's chromium
(driven by Playwright; browsers cannot be downloaded here, so the system's is used), notebooks run with
Run > Run All Cells in the smoke setting, as a student runs them.

Each notebook is staged in ``build/browser/`` (the committed notebook with papermill's smoke parameters
injected, as nbval's copies are), opened in JupyterLab, run, saved by JupyterLab, and read back from disk:
what the page showed. Screenshots go to ``build/screenshots/``. Run by ``python3 tasks.py test`` after
nbval (marker ``browser``); by hand: ``.venv/bin/python -m pytest -m browser tests/test_browser.py``.
"""

from __future__ import annotations

import configparser
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from types import SimpleNamespace

import nbformat
import psutil
import pytest

import tasks
from process_checks import alive
from tools.notebook_params import ROOT, smoke_notebook

pytestmark = pytest.mark.browser
CHROMIUM = next(filter(None, map(shutil.which, tasks.CHROMIUM_COMMANDS)), None)
STAGE = ROOT / "build" / "browser"
SHOTS = ROOT / "build" / "screenshots"
RUN_TIMEOUT_S = 300
EXERCISE = "exercises/07_svhn.ipynb"
PROMPTS = ".jp-CodeCell .jp-InputArea-prompt"  # "[ ]:", "[*]:" (waiting or running), "[3]:"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab as `python3 tasks.py lab` starts it, on a free port with a token; stopped afterwards,
    and every process it started (kernels included) checked gone."""
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine (`python3 tasks.py setup` installs Debian's as root)")
    playwright = pytest.importorskip("playwright.sync_api")
    shutil.rmtree(STAGE, ignore_errors=True)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    command, env = tasks.lab_command(["--no-browser", f"--port={port}", f"--IdentityProvider.token={token}"])
    runtime = tmp_path_factory.mktemp("lab")
    env.update(JUPYTER_RUNTIME_DIR=str(runtime), COURSE_OFFLINE="1")
    log = open(runtime / "lab.log", "w")
    server = subprocess.Popen([str(c) for c in command], cwd=ROOT, env=env, stdout=log, stderr=log,
                              start_new_session=True)
    base = f"http://localhost:{port}"
    started: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5).close()
                break
            except (urllib.error.URLError, ConnectionError):
                assert server.poll() is None and time.monotonic() < deadline, (runtime / "lab.log").read_text()
                time.sleep(0.5)
        with playwright.sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 1600})
            yield SimpleNamespace(page=page, base=base, token=token, server=server.pid, started=started)
            browser.close()
    finally:
        started |= {p.pid for p in psutil.Process(server.pid).children(recursive=True)}
        tasks.stop_group(server, grace_s=30)  # on SIGTERM the server shuts its kernels down
        log.close()
        deadline = time.monotonic() + 20
        while any(alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [pid for pid in started if alive(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, f"processes the lab server started outlived it: {left}"


def stage(rel: str):
    """The committed notebook in the smoke setting, outputs kept and execution counts cleared: a count on
    the page after Run All was given by this run's kernel."""
    nb = smoke_notebook(ROOT / rel)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.execution_count = None
    out = STAGE / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    return out


def _prompts(page) -> list[str]:
    # textContent, not innerText: JupyterLab skips rendering cells outside the view (content-visibility)
    return [p.text_content() or "" for p in page.locator(PROMPTS).all()]


def wait_idle(lab, timeout: float = RUN_TIMEOUT_S) -> None:
    """Until no cell waits or runs ("[*]") and the kernel is idle, twice in a row."""
    deadline, calm = time.monotonic() + timeout, 0
    while calm < 2:
        assert time.monotonic() < deadline, f"cells still running after {timeout} s: {_prompts(lab.page)}"
        lab.page.wait_for_timeout(500)
        status = lab.page.locator(".jp-Notebook-ExecutionIndicator").first.get_attribute("data-status")
        calm = calm + 1 if status == "idle" and not any("*" in p for p in _prompts(lab.page)) else 0
        lab.started |= {p.pid for p in psutil.Process(lab.server).children(recursive=True)}


def wait_kernel_ready(lab, staged, timeout: float = 120) -> None:
    """Until the status bar shows this notebook's kernel connected and idle ("<kernel> | Idle"), or fail
    with what JupyterLab shows instead (a dialog such as "Select Kernel", or the status bar).

    Not the toolbar's execution indicator: it reads "idle" until the first kernel status arrives. And
    JupyterLab silently runs no cell when Run All comes before the notebook's session has its kernel.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page = lab.page
    ready = page.locator(f".jp-StatusBar-TextItem[title$='{staged.name}']", has_text=re.compile(r"\| Idle$"))
    dialog = page.locator(".jp-Dialog")
    try:
        ready.or_(dialog).first.wait_for(timeout=timeout * 1000)
    except PlaywrightTimeout:
        texts = page.locator(".jp-StatusBar-TextItem").all_text_contents()
        pytest.fail(f"the kernel of {staged.name} was not connected and idle after {timeout} s; status bar: {texts}")
    if dialog.count():  # e.g. "Select Kernel" for a kernel name JupyterLab does not have
        page.screenshot(path=SHOTS / f"{staged.stem}-dialog.png")
        pytest.fail(f"JupyterLab shows a dialog instead of the notebook: {' '.join(dialog.first.inner_text().split())}")


def open_and_run_all(lab, rel: str):
    """Stage the notebook, open it in JupyterLab, Run > Run All Cells, wait until it has run."""
    return run_all(lab, stage(rel))


def run_all(lab, staged):
    """Open a staged notebook in JupyterLab, Run > Run All Cells, wait until it has run."""
    page = lab.page
    page.goto(f"{lab.base}/lab/tree/{staged.relative_to(ROOT).as_posix()}?token={lab.token}&reset")
    page.locator(".jp-NotebookPanel .jp-CodeCell").first.wait_for(timeout=60_000)
    wait_kernel_ready(lab, staged)
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    from playwright.sync_api import expect

    first = page.locator(PROMPTS).first
    try:  # "[*]:" or "[1]:"; JupyterLab leaves a cell it does not send to a kernel as it was ("[ ]:")
        expect(first).to_have_text(re.compile(r"\[(\*|\d+)\]"), timeout=30_000)
    except AssertionError as e:
        page.screenshot(path=SHOTS / f"{staged.stem}-not-run.png")
        pytest.fail(f"Run All Cells ran nothing: the first cell's prompt is {first.text_content()!r} ({e})")
    wait_idle(lab)
    return page, staged


def save(page, staged) -> nbformat.NotebookNode:
    """JupyterLab saves the notebook (File > Save); the file on disk is what the page holds. Read once the
    server has answered the save (its PUT): the file is written and closed by then."""
    path = "/api/contents/" + staged.relative_to(ROOT).as_posix()

    def is_the_save(response) -> bool:
        url_path = urllib.parse.unquote(urllib.parse.urlsplit(response.url).path)
        return response.request.method == "PUT" and url_path == path

    with page.expect_response(is_the_save, timeout=30_000) as saved:
        page.keyboard.press("Control+s")
    assert saved.value.ok, f"JupyterLab's save answered {saved.value.status}: {saved.value.text()}"
    return nbformat.read(staged, as_version=4)


def _sanitize(text: str) -> str:
    config = configparser.ConfigParser()
    config.read(ROOT / "tests" / "nbval_sanitize.cfg")
    for section in config.sections():
        text = re.sub(config[section]["regex"], config[section]["replace"], text)
    return text


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def errors(nb) -> list[tuple[int, str]]:
    return [(i, f"{o.ename}: {o.evalue}") for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for o in c.outputs if o.output_type == "error"]


def test_notebook_01_runs_all_cells_in_jupyterlab_with_its_checked_outputs(lab):
    page, staged = open_and_run_all(lab, "notebooks/01_strategies_overview.ipynb")
    page.screenshot(path=SHOTS / "01_strategies_overview.png")
    ran = save(page, staged)
    assert errors(ran) == []
    counts = [c.execution_count for c in ran.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), "every code cell ran once, in order, in this run's kernel"
    committed = nbformat.read(ROOT / "notebooks/01_strategies_overview.ipynb", as_version=4)
    checked = {c.id: c for c in committed.cells if c.cell_type == "code" and "# NBVAL_CHECK_OUTPUT" in c.source}
    assert checked, "notebook 01 has checked cells"
    for cell in ran.cells:
        if cell.id in checked:
            assert _sanitize(_text(cell)) == _sanitize(_text(checked[cell.id])), cell.source


def test_notebook_02_shows_tensorboard_with_the_runs_loss_and_learning_rate(lab):
    page, staged = open_and_run_all(lab, "notebooks/02_mirrored_strategy_fit.ipynb")
    ran = save(page, staged)
    assert errors(ran) == []
    frame_element = page.locator("iframe[id^='tensorboard-frame']")
    frame_element.scroll_into_view_if_needed()
    board = page.frame_locator("iframe[id^='tensorboard-frame']")
    for text in ("epoch_loss", "epoch_learning_rate", "train", "validation"):
        board.get_by_text(text, exact=True).first.wait_for(timeout=60_000)
    page.wait_for_timeout(2000)  # the charts draw their lines
    frame_element.screenshot(path=SHOTS / "02_tensorboard_scalars.png")


def test_the_exercise_runs_to_its_first_answer_and_the_check_says_not_answered_yet(lab):
    page, staged = open_and_run_all(lab, EXERCISE)
    ran = save(page, staged)
    first_answer = next(i for i, c in enumerate(ran.cells) if c.cell_type == "code" and "# YOUR CODE HERE" in c.source)
    check = next(i for i, c in enumerate(ran.cells) if i > first_answer and "checks.require(" in c.source)
    # Run All stops at the first error: the answer cell's `raise NotImplementedError()`, nothing before it
    assert errors(ran) == [(first_answer, "NotImplementedError: ")]
    code_before = [c for c in ran.cells[:first_answer] if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code_before)
    assert all(c.execution_count is None for c in ran.cells[first_answer + 1:] if c.cell_type == "code")
    # the student runs the check below it
    from playwright.sync_api import expect

    cell = page.locator(".jp-Notebook .jp-Cell").nth(check)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    expect(cell.locator(".jp-InputArea-prompt")).to_have_text(re.compile(r"\[\d+\]"), timeout=60_000)
    wait_idle(lab)
    cell.scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "07_svhn_exercise.png")
    ran = save(page, staged)
    [output] = ran.cells[check].outputs
    assert output.output_type == "error" and output.ename == "CheckFailed"
    shown = "\n".join(output.traceback)
    assert "Exercise 1 is not answered yet" in shown and "Traceback" not in shown and "File " not in shown, shown


SLOW_SESSION_LIST = """
  const realFetch = window.fetch;
  window.fetch = async (input, init) => {
    const url = typeof input === "string" ? input : input.url || String(input);
    const method = (init && init.method) || (input && input.method) || "GET";
    if (url.includes("/api/sessions?") && method === "GET") await new Promise(done => setTimeout(done, %d));
    return realFetch(input, init);
  };
"""


def test_run_all_waits_for_the_kernel_when_the_session_list_comes_late(lab):
    """The page gets the server's list of sessions 4 s late, as on a loaded machine (CI failed once so): Run All
    still runs every cell. JupyterLab starts the notebook's kernel only after that list; a Run All before
    the kernel runs nothing and says nothing, and the toolbar's indicator reads "idle" meanwhile."""
    STAGE.mkdir(parents=True, exist_ok=True)
    staged = STAGE / "late_session_list.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"x = {i}") for i in range(3)])
    course_notebook = nbformat.read(ROOT / "notebooks/01_strategies_overview.ipynb", as_version=4)
    nb.metadata.kernelspec = course_notebook.metadata.kernelspec  # the course's kernel: no "Select Kernel"
    nbformat.write(nb, staged)
    page = lab.page.context.browser.new_page()
    try:
        page.add_init_script(SLOW_SESSION_LIST % 4000)
        ran = save(run_all(SimpleNamespace(**{**vars(lab), "page": page}), staged)[0], staged)
    finally:
        page.close()
    assert [c.execution_count for c in ran.cells] == [1, 2, 3]
