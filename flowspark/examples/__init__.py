"""Example flows, shipped with the package so that an installed flowspark can run them.

Each one reads its sample data from `sample_data/` beside it, whatever the
working directory: `python -m flowspark.run flowspark.examples.wordcount:flow`.
"""
