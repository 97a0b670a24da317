"""Private parts of `flowspark.operators.windowing`.

`base` holds the abstract interfaces and constants, `clocks` and `windowers`
the built-in implementations (`hopping`, `record_sliding` and
`dynamic_sessions` flowspark's additional windowers), `per_key` the one
`StatefulBatchLogic` that drives them for a key, and `logics` the window
logics behind the derived operators.  The operators themselves are in
`window_operators` (`WindowOut`, `window`, `fold_window`), `fold_operators`
(collect, count, reduce, max, min), `aggregate_operators` (sum, mean,
aggregate) and `join_operator` (`join_window`).  Users import everything
from `flowspark.operators.windowing`.
"""
