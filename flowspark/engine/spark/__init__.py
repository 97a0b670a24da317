"""The Spark a run uses: the session flowspark starts (`session`), or the one `run_spark` picks.

Also the checks before Spark starts (`spark_version`, `java_check`),
what makes its start quick (`class_archive`, `native_libs`, `warm_up`),
the user's own settings (`spark_defaults`), shipping the user's modules
(`shipping`) and a cluster's checks (`cluster`).  Imports `connect`,
`plan`, `recovery` and `sources`.
"""
