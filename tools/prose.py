"""Prose statistics of a notebook, the numbers ``tools/budgets.toml`` limits: ``python -m tools.prose [NOTEBOOK ...]``.

Prints one line per notebook (without NOTEBOOKs: every lesson, deeper notebook and solution): cells, words,
sentences, mean words per sentence, the share of sentences over 40 words, printed output lines and the
recorded run time. ``python -m tools.nblint`` checks them against the table.

What is counted, in the markdown cells only:

- **Dropped**: fenced code blocks (```` ``` ```` or ``~~~``), HTML comments, images (``![alt](url)``,
  ``<img>``), raw URLs (``https://...``, ``<https://...>``), link reference definitions (``[x]: url``),
  HTML tags (their text is kept), table separator rows (``|---|---|``) and empty lines.
- **Kept**: a link's text (``[text](url)`` is ``text``); emphasis without its ``*``/``_`` marks.
- **Words**: whitespace-separated tokens holding a letter or a digit. An inline ```code``` span is one
  word, whatever it holds. Heading marks, list marks (``-``, ``*``, ``+``, ``1.``), quote marks and
  table bars are not words.
- **Sentences**: each heading, each list item (with its continuation lines), each table row and each
  paragraph (lines up to an empty line or one of those) is split into sentences after ``.``, ``!`` or
  ``?`` (closing quotes, brackets or emphasis may follow it) when a space and an upper-case letter, a
  quote, a backtick or a digit come next, or the line ends; not after ``e.g.``, ``i.e.``, ``vs.``,
  ``cf.``. So a heading or list item without a full stop is one sentence. A sentence of 0 words (a
  horizontal rule, a badge alone) is not counted.
- **Mean sentence** = words / sentences; a **long sentence** has over 40 words.

And in the code cells, the **output lines** a reader scrolls past: each stream's text (consecutive
outputs of one stream joined, a ``\\r`` progress update is no new line), the ``text/plain`` lines of an
``execute_result`` or ``display_data`` that holds no image (an image counts 0), and an error's traceback.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tools.notebook_metadata import COURSE_KEY, WALL_TIME_KEY
from tools.notebook_params import ROOT

LONG_SENTENCE = 40  # words: a sentence over this is long

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(\s|$)")
_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s+")
_TABLE_ROW = re.compile(r"^\s*\|")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+")
_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_IMAGE = re.compile(r"!\[[^\]]*\](\([^)]*\)|\[[^\]]*\])|<img\b[^>]*>", re.I)
_AUTOLINK = re.compile(r"<(https?|mailto):[^>]*>")
_LINK = re.compile(r"\[([^\]]*)\](\([^)]*\)|\[[^\]]*\])")
_URL = re.compile(r"https?://\S+?(?=[.,;:!?)\]'\"]*(\s|$))")
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_EMPHASIS = re.compile(r"(?<![^\W_])[*_]+|[*_]+(?![^\W_])")
_MARKS = re.compile(r"^\s*(>\s*)*(#{1,6}\s+|([-*+]|\d+[.)])\s+)?", re.M)
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)(?<!\bcf)[.!?]['\")\]’”]*"
                           r"(?:[ \t]+(?=[A-Z\"'`‘“\d])|[ \t]*(?:\n|$))")
_WORD = re.compile(r"[^\W_]")
CODE_WORD = "`code`"  # what an inline code span becomes: one word


def blocks(markdown: str) -> list[str]:
    """The markdown's headings, list items, table rows and paragraphs, fences, comments and rules gone."""
    found: list[str] = []
    current: list[str] = []
    fence = None

    def flush():
        if current:
            found.append("\n".join(current))
            current.clear()

    for line in _COMMENT.sub("", markdown).splitlines():
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened[1][0] == fence[0] and len(opened[1]) >= len(fence):
                fence = None
            continue
        if opened:
            flush()
            fence = opened[1]
        elif not line.strip() or _TABLE_SEPARATOR.match(line) or _REFERENCE.match(line):
            flush()
        elif _HEADING.match(line) or _TABLE_ROW.match(line):
            flush()
            found.append(line)
        elif _ITEM.match(line):
            flush()
            current.append(line)
        else:
            current.append(line)  # a paragraph's next line, or a list item's continuation
    flush()
    return found


def plain(block: str) -> str:
    """One block as the words a reader reads: code spans as one word each, no images, URLs or markup."""
    text = _CODE.sub(f" {CODE_WORD} ", block) if "`" in block else block
    text = _IMAGE.sub("", text)
    text = _AUTOLINK.sub("", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("", text)
    text = _TAG.sub(" ", text)
    text = _MARKS.sub("", text)
    text = text.replace("|", " ")
    return _EMPHASIS.sub("", text)


def word_count(text: str) -> int:
    return sum(1 for token in text.split() if _WORD.search(token))


def sentence_lengths(markdown: str) -> list[int]:
    """Words per sentence of a markdown text, in order (sentences of 0 words left out)."""
    lengths = []
    for block in blocks(markdown):
        for sentence in _SENTENCE_END.split(plain(block)):
            n = word_count(sentence)
            if n:
                lengths.append(n)
    return lengths


def words(markdown: str) -> int:
    """Words of a markdown text, as counted here."""
    return sum(sentence_lengths(markdown))


def _lines(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def output_lines(cell) -> int:
    """The lines a code cell's outputs print (images count 0)."""
    total, stream, name = 0, "", None
    for out in cell.get("outputs", []):
        if out.output_type == "stream" and out.get("name") == name:
            stream += out.get("text", "")
            continue
        total += _lines(stream)
        stream, name = "", None
        if out.output_type == "stream":
            stream, name = out.get("text", ""), out.get("name")
        elif out.output_type in ("execute_result", "display_data"):
            data = out.get("data", {})
            if not any(key.startswith("image/") for key in data):
                total += _lines(data.get("text/plain", ""))
        elif out.output_type == "error":
            total += _lines("\n".join(out.get("traceback", [])))
    return total + _lines(stream)


@dataclass(frozen=True)
class Stats:
    """What a notebook measures. ``output_lines`` is None when no code cell has outputs (not run);
    ``wall_time_s`` is None when the course command has not recorded a run time."""

    cells: int
    words: int
    sentences: int
    long_sentences: int
    output_lines: int | None
    wall_time_s: int | None

    @property
    def mean_sentence_words(self) -> float:
        return self.words / self.sentences if self.sentences else 0.0

    @property
    def long_sentence_percent(self) -> float:
        return 100 * self.long_sentences / self.sentences if self.sentences else 0.0


def stats(nb) -> Stats:
    """The prose statistics of a notebook (an nbformat notebook object)."""
    lengths = [n for cell in nb.cells if cell.cell_type == "markdown" for n in sentence_lengths(cell.source)]
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    ran = any(cell.get("outputs") for cell in code)
    wall = nb.metadata.get(COURSE_KEY, {}).get(WALL_TIME_KEY)
    return Stats(cells=len(nb.cells), words=sum(lengths), sentences=len(lengths),
                 long_sentences=sum(n > LONG_SENTENCE for n in lengths),
                 output_lines=sum(output_lines(cell) for cell in code) if ran else None,
                 wall_time_s=int(wall) if wall is not None else None)


def measure(path: Path) -> Stats:
    return stats(nbformat.read(path, as_version=4))


def default_notebooks() -> list[Path]:
    return [p for folder in ("notebooks", "notebooks/deeper", "solutions")
            for p in sorted((ROOT / folder).glob("[0-9]*.ipynb"))]


HEADER = f"{'notebook':<46} {'cells':>5} {'words':>6} {'sent.':>5} {'mean':>5} {'>40':>6} {'output':>6} {'time':>6}"


def row(name: str, s: Stats) -> str:
    out = "-" if s.output_lines is None else s.output_lines
    time = "-" if s.wall_time_s is None else f"{s.wall_time_s} s"
    return (f"{name:<46} {s.cells:>5} {s.words:>6} {s.sentences:>5} {s.mean_sentence_words:>5.1f} "
            f"{s.long_sentence_percent:>5.1f}% {out:>6} {time:>6}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.prose", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: the course's)")
    args = parser.parse_args(argv)
    print(HEADER)
    for path in args.paths or default_notebooks():
        resolved = path.resolve()
        name = resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else str(path)
        print(row(name, measure(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
