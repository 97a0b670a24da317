"""The planner and the Spark runtime: the only package that imports pyspark.

`runner` runs a flow with a `run_config.RunConfig`: each attempt of the
run is one `attempt.Attempt`, which the flow's one streaming query
(`streaming_query`) takes whole (`batch_query` runs a flow whose input
ends at once as one batch query, from the same `Attempt`; `shutdown`
stops a run on SIGTERM, `process_zero` keeps Bytewax's other processes
waiting; `run_context` is what the run's code may ask of it).  Its wings:

- `plan`: the flow as Spark's tables, and the rows between stages;
- `sources`, `state`, `sinks`: inputs, `stateful_batch` steps and outputs on Spark;
- `recovery`: the recovery directory;
- `spark` and `connect`: the Spark a run uses, local, on a cluster or through Spark Connect;
- `reports`: what travels back to the user's process.

Nothing here imports the launch path above it (`flowspark.launch`, `run`,
`testing`, `dataflow_api`, `visualize`): what the engine needs of it is
handed in.
"""

from flowspark.engine.spark.spark_version import check_installed_pyspark

check_installed_pyspark()
