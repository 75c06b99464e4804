"""Slurm's compressed host and task lists, expanded without TensorFlow (and without ``scontrol``).

A Slurm task learns its job step's nodes from ``SLURM_STEP_NODELIST`` (``c[001-003,7],d1``) and their task
counts from ``SLURM_STEP_TASKS_PER_NODE`` (``2(x3),1``). :func:`expand_hostlist` and
:func:`expand_tasks_per_node` turn them into lists in Slurm's own order, as ``scontrol show hostnames`` does:

- a name may hold several bracket groups (``rack[1-2]-n[1-2]`` is a product: rack1-n1, rack1-n2, rack2-n1, ...);
- each range keeps the width of its first number: ``c[001-003,7]`` is c001, c002, c003, c7, and
  ``c[9-10]`` is c9, c10 (unpadded: sorting these names as strings would put c10 first);
- commas separate names outside brackets and ranges inside them.

TensorFlow has a parser of its own (``slurm_cluster_resolver.expand_hostlist``), but a task would import
TensorFlow once more just to read two variables; this one is plain Python and is checked against the same
examples in ``tests/test_slurm_hostlist.py``.
"""

from __future__ import annotations

import re


def _split_top_level(text: str) -> list[str]:
    """Split at commas that are not inside brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in host list {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise ValueError(f"unbalanced '[' in host list {text!r}")
    parts.append("".join(current))
    return [part for part in parts if part]


def _expand_ranges(ranges: str, whole: str) -> list[str]:
    """``001-003,7`` -> ['001', '002', '003', '7']: each range at the width of its first number."""
    out = []
    for item in ranges.split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", item.strip())
        if not match:
            raise ValueError(f"{item!r} in host list {whole!r} is not a number or a range such as 01-12")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise ValueError(f"range {item!r} in host list {whole!r} runs backwards")
        width = len(low)
        out.extend(str(n).zfill(width) for n in range(int(low), int(high) + 1))
    return out


def _expand_name(name: str, whole: str) -> list[str]:
    match = re.search(r"\[([^\[\]]*)\]", name)
    if not match:
        if "[" in name or "]" in name:
            raise ValueError(f"nested or unbalanced brackets in host list {whole!r}")
        return [name]
    head, tail = name[:match.start()], name[match.end():]
    return [head + value + rest for value in _expand_ranges(match.group(1), whole)
            for rest in _expand_name(tail, whole)]


def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's compressed host list (``c[001-003,7],d1``) as names, in Slurm's order."""
    if not hostlist or not hostlist.strip():
        raise ValueError("the host list is empty")
    return [host for name in _split_top_level(hostlist.strip()) for host in _expand_name(name, hostlist)]


def expand_tasks_per_node(tasks_per_node: str) -> list[int]:
    """Slurm's task counts per node (``2(x3),1``) as one count per node: [2, 2, 2, 1]."""
    counts = []
    for item in tasks_per_node.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item.strip())
        if not match:
            raise ValueError(f"{item!r} in {tasks_per_node!r} is not a task count such as 2 or 2(x3)")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts
