"""`examples.wordcount` and the others, from a checkout: the flows live in `flowspark.examples`.

This package only points its module search at `flowspark/examples/`, so the
short names keep working where the repository is the working directory.
"""

from pathlib import Path

__path__ = [str(Path(__file__).resolve().parent.parent / "flowspark" / "examples")]
