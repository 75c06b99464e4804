"""tools/colab_sim.py's rules, on pip lists and notebooks made here (the simulation itself runs in
`python3 tasks.py test`, beside the unit tests: it needs the package registry, as Colab does)."""

import nbformat
import pytest

from tools import colab_sim
from tools.links import INSTALL_MARKER
from tools.notebook_params import ROOT

COLAB = {"tensorflow": "2.20.0", "keras": "3.13.2", "tf-keras": "2.20.1", "tensorboard": "2.20.0",
         "tensorflow-metadata": "1.21.0", "numpy": "2.1.3", "protobuf": "5.29.6"}


def after(**changes):
    listed = dict(COLAB, **{"course-utils": "0.1.0", "importlib-resources": "7.1.0"})
    listed.update({name.replace("_", "-"): version for name, version in changes.items()})
    return {name: version for name, version in listed.items() if version is not None}


def test_an_install_that_only_adds_and_fixes_tensorflow_metadata_passes_and_says_what_it_did():
    failures, notes = colab_sim.check(COLAB, after(tensorflow_metadata="1.17.3"))
    assert failures == []
    assert notes[0].startswith("changed, as expected: tensorflow-metadata 1.21.0 -> 1.17.3 (")
    assert notes[1] == "added: course-utils 0.1.0, importlib-resources 7.1.0"


@pytest.mark.parametrize("changes, failure", [
    ({"tensorflow": "2.21.0", "tf_keras": "2.21.0", "tensorboard": "2.21.0"},
     "tensorflow changed: Colab's 2.20.0 -> 2.21.0"),  # e.g. an unpinned tf-keras pulls a newer TensorFlow
    ({"keras": "3.10.0"}, "keras changed: Colab's 3.13.2 -> 3.10.0"),
    ({"tensorflow_cpu": "2.20.0"}, "a second TensorFlow was installed: tensorflow-cpu 2.20.0"),
    ({"tf_keras": "2.19.0"}, "tf-keras 2.19.0 does not have TensorFlow's minor version 2.20"),
    ({"tensorboard": None}, "tensorboard missing does not have TensorFlow's minor version 2.20"),
    ({"numpy": "1.26.4"}, "a preinstalled package changed: numpy 2.1.3 -> 1.26.4"),
    ({"protobuf": None}, "a preinstalled package was removed: protobuf 5.29.6"),
    ({"course_utils": None}, "course-utils was not installed"),
])
def test_each_thing_an_install_cell_must_not_do_fails_with_its_name(changes, failure):
    failures, _ = colab_sim.check(COLAB, after(**changes))
    assert failure in failures


def test_the_staged_copy_installs_from_the_given_url_in_the_smoke_setting(tmp_path):
    staged = colab_sim.stage("notebooks/01_strategies_overview.ipynb", tmp_path, "file:///some/checkout")
    assert staged == tmp_path / "notebooks" / "01_strategies_overview.ipynb"
    nb = nbformat.read(staged, as_version=4)
    [install] = [c for c in nb.cells if c.cell_type == "code" and INSTALL_MARKER in c.source]
    assert '"course-utils @ git+file:///some/checkout"' in install.source and "github.com" not in install.source
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells)


def test_the_runtime_file_pins_colabs_tensorflow_family_and_names_its_python():
    pins = dict(line.split("==") for line in colab_sim.RUNTIME.read_text().splitlines()
                if line and not line.startswith("#"))
    pins = {colab_sim.norm(name): version for name, version in pins.items()}
    assert colab_sim.runtime_python() == "3.13"
    for name in ("tensorflow", "keras", "tf-keras", "tensorboard", "ipykernel", "pip"):
        assert name in pins, name
    assert "course-utils" not in pins and "importlib-resources" not in pins, "what the install cell adds"


def test_a_missing_python_falls_back_to_this_one(monkeypatch):
    monkeypatch.setattr(colab_sim.shutil, "which", lambda name: None)
    monkeypatch.setattr(colab_sim.glob, "glob", lambda pattern: [])
    python, matched = colab_sim.find_python("3.99")
    assert not matched and python == colab_sim.sys.executable
    assert (ROOT / "colab-runtime.txt").exists()
