"""The planner and the Spark runtime: the only package that imports pyspark.

`plan` turns a `Dataflow` into tables the runtime reads; `route` is the fused
pass that carries batches through runs of stateless steps; `chunks` is the
row format between Spark stages, `destinations` the rows' group names and
`input_end` how the input ends; `source_hub` (driver-resident sources),
`executor_source` with its `snapshot_store` (sources read in Spark's
tasks), `spark_source`, `stateful` and `sink_writer` are the Spark side of inputs, `stateful_batch` steps and
outputs; `runner` builds the one streaming query and drives it.
"""

from flowspark.engine.spark_version import check_installed_pyspark

check_installed_pyspark()
