"""The planner and the Spark runtime: the only package that imports pyspark.

`runner` runs a flow with a `run_config.RunConfig`: it picks the Spark
(`run_spark`, warmed by `warm_up`), and each attempt of the run is one
`attempt.Attempt`, which the flow's one streaming query
(`streaming_query`) takes whole (`batch_query` runs a flow whose input
ends at once as one batch query, from the same `Attempt`; `process_zero`
keeps Bytewax's other processes waiting; `run_context` is what the run's
code may ask of it).  Its folders are floors, each importing only the
ones below it (`tests/test_import_graph.py` checks the order), from the
bottom:

- `util`: what several folders share (`shutdown` stops a run on SIGTERM);
- `reports`: what travels back to the user's process;
- `plan`: the flow as Spark's tables, and the rows between stages;
- `recovery`: the recovery directory;
- `sources`, `sinks`: inputs and outputs on Spark;
- `spark`: the Spark session flowspark starts;
- `state`: `stateful_batch` steps on Spark;
- `connect`: Spark Connect, and the warm local server.

Nothing here imports the launch path above it (`flowspark._launch`, `run`,
`testing`, `_dataflow_api`, `visualize`): what the engine needs of it is
handed in.
"""

from flowspark.engine.spark.spark_version import check_installed_pyspark

check_installed_pyspark()
