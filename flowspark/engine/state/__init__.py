"""`stateful_batch` steps on Spark: `stateful` runs them inside `transformWithState`.

A bucket's keys live in `keyed_state` of many keys each, kept by a Python
worker for its next micro-batch (`keyed_state_cache`); `memory_state` is the
in-memory state of a batch query, `inspect_state` reads a recovery
directory's state.  Imports `plan`, `recovery`, `reports`,
`spark` (`inspect_state`'s session) and `util`.
"""
