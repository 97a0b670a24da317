"""The flow as Spark sees it: `plan` turns a `Dataflow` into the tables the runtime reads, and the rows between Spark's
stages are laid out here.

`plan` (steps, layers, where each source and sink partition lives),
`groups` and `destinations` (the `grp` column Spark groups rows by),
`chunks`, `keyed_chunks`, `encoded_lines` and `line_blocks` (the row
formats), `route` (the fused pass through runs of stateless steps),
`task_sinks` (the dynamic sinks that pass writes in its own task) and
`order` (one Bytewax worker's order).  Imports the dataflow API,
`reports` and `util`.
"""
