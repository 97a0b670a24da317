"""What travels back to the user's process: the driver link, the user's failures, prints, metrics and progress.

`driver_link` is the one channel from Spark's Python processes;
`failures` carries a user's exception to the driver and `fault_report`
words Spark's own in one line; `worker_prints`, `metrics` and `progress`
report what a run does, and `proxy_log` keeps py4j quiet about failures
raised anyway.  Imports `util`.
"""
