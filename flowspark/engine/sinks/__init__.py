"""Outputs on Spark: `sink_writer` is the one `foreachBatch` callback of a flow.

Partitions written in Spark's tasks go through `sink_tasks` and
`pass_sinks`, the driver's through `sink_writer` (overlapped by
`write_behind`); `sink_ledger` records which micro-batch they were
written through, `sink_batch` which one a partition is writing, and
`remote_writer` carries the callback through Spark Connect.  Imports
`plan`, `recovery`, `reports`, `sources` and the run's context.
"""
