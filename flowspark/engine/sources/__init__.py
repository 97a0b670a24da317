"""Inputs on Spark: `spark_source` is the one Python streaming data source of a flow.

Driver-resident partitions are read by `driver_inputs` (each a
`driver_partition`), partitions that may
leave the driver by `executor_source` in the tasks that own them, with
their snapshots in `snapshot_store`; `read_ahead` reads the next
micro-batch early, `wake_ups` says when timers alone make one due and
`input_end` how the input ends; `data_source` is the little the planner
process of Spark imports.  Imports `plan`, `recovery`, `reports` and
`util`.
"""
