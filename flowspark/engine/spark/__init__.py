"""The Spark session flowspark starts (`session`), and what it needs before and as it starts.

The checks before Spark starts (`spark_version`, `java_check`), what
makes its start quick (`class_archive`, `native_libs`, and the
`fork_server` its Pythons are forked from, through `forked_python`; the
warm server uses them too), the user's own settings (`spark_defaults`),
shipping the user's modules (`shipping`) and a cluster's checks
(`cluster`).  Which Spark a run uses is chosen above, in
`engine.run_spark`.  Imports `sources` (the data source it registers)
and `util`.
"""
