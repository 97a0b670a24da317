"""Outputs on Spark: `sink_writer` is the one `foreachBatch` callback of a flow.

Partitions written in Spark's tasks go through `sink_tasks` (the dynamic
sinks the fused pass writes are `plan.task_sinks`), the driver's through
`sink_writer` (overlapped by `async_write`); `batch_id` says which
micro-batch a partition is writing, and `remote_writer` carries the
callback through Spark Connect.  Imports `plan`, `recovery`, `reports`,
`sources` and `util`.
"""
