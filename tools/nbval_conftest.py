"""Copied as conftest.py beside the notebooks that nbval runs (tools/stage_nbval.py).

nbval 0.11 waits a fixed 5 s for each of a cell's output messages once the kernel has replied (its
``NbCellItem.output_timeout``, with no option to change it): on a loaded machine a figure or a long
output can arrive later, and the cell fails with "Timeout of 5 seconds exceeded waiting for output"
although it ran. The wait ends as soon as the output arrives, so a longer one costs nothing.
"""

OUTPUT_TIMEOUT_S = 120


def pytest_collection_modifyitems(items):
    for item in items:
        if hasattr(item, "output_timeout"):
            item.output_timeout = OUTPUT_TIMEOUT_S
