"""The recovery directory: Spark's checkpoint and flowspark's own records beside it.

`storage` reads and writes a local path or a Hadoop URI, `recovery_dir`,
`resume_check` and `checkpoint_check` decide whether a directory may be
resumed, `sink_ledger` records which micro-batch the sinks were written
through and `driver_fence` lets one driver write at a time (a
directory's keyed state is read back by `state.inspect_state`, which
needs a Spark session).  `flowspark.recovery` (Bytewax's `RecoveryConfig`
and the `python -m flowspark.recovery` command) points here.  Imports
`plan`, for what the records hold, and `util`.
"""
