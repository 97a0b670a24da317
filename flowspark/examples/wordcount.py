"""Count the words of a text file; print `(word, count)` lines at the end.

Run it with `python -m flowspark.run flowspark.examples.wordcount:flow`.
"""

import re
from pathlib import Path
from typing import List

import flowspark.operators as op
from flowspark.connectors.files import FileSource
from flowspark.connectors.stdio import StdOutSink
from flowspark.dataflow import Dataflow

TEXT = Path(__file__).parent / "sample_data" / "wordcount.txt"


def lower(line: str) -> str:
    return line.lower()


def tokenize(line: str) -> List[str]:
    return re.findall(r"[^\s!,.?\":;0-9]+", line)


def by_word(word: str) -> str:
    return word


flow = Dataflow("wordcount")
lines = op.input("inp", flow, FileSource(TEXT))
lowers = op.map("lowercase_words", lines, lower)
words = op.flat_map("tokenize_input", lowers, tokenize)
counts = op.count_final("count", words, by_word)
op.output("out", counts, StdOutSink())
