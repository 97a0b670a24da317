"""The README example (`flowspark/examples/wordcount.py`) written once for either engine.

Its sample text -> lowercase -> split into words -> `count_final` per word ->
`(word, count)` lines on stdout, with the example's own functions and data,
so `python -m bytewax.run benchmarks.flows.wordcount:flow` is the example as
a Bytewax user runs it.  The sample text is found without importing
flowspark, so a Bytewax run pays for no flowspark import.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import List

from benchmarks.flows import engine, module


def sample_text() -> Path:
    """The example's sample data, from where flowspark is installed."""
    spec = importlib.util.find_spec("flowspark")
    if spec is None or spec.origin is None:
        msg = "flowspark is not installed: the wordcount sample data comes with it"
        raise RuntimeError(msg)
    return Path(spec.origin).parent / "examples" / "sample_data" / "wordcount.txt"


def lower(line: str) -> str:
    return line.lower()


def tokenize(line: str) -> List[str]:
    return re.findall(r"[^\s!,.?\":;0-9]+", line)


def by_word(word: str) -> str:
    return word


api = engine()
flow = api.dataflow.Dataflow("wordcount")
lines = api.op.input("inp", flow, api.files.FileSource(sample_text()))
lowers = api.op.map("lowercase_words", lines, lower)
words = api.op.flat_map("tokenize_input", lowers, tokenize)
counts = api.op.count_final("count", words, by_word)
api.op.output("out", counts, module("connectors.stdio").StdOutSink())
