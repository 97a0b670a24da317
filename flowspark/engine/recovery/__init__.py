"""The recovery directory: Spark's checkpoint and flowspark's own records beside it.

`storage` reads and writes a local path or a Hadoop URI, `recovery_dir`,
`resume_check` and `checkpoint_check` decide whether a directory may be
resumed, `driver_fence` lets one driver write at a time and
`private_files` keeps the records private to the user.  Imports `plan`,
`sinks` and `sources` for what the records hold.
"""
