"""Private parts of `flowspark.operators.windowing`.

`base` holds the abstract interfaces and constants, `clocks` and `windowers`
the built-in implementations (`hopping`, `record_sliding` and
`dynamic_sessions` flowspark's additional windowers), `per_key` the one
`StatefulBatchLogic` that drives them for a key, and `logics` the window
logics behind the derived operators.  How windows fire: `firing` holds the
options value (`Firing`) and the configuration of steps that use it, whose
parts are `emission` (panes, emit modes, triggers) and `lateness` (closed
windows kept for late values), over the base parts and events in `parts`;
`panes` holds the `Pane` record and emit modes, `triggers` the triggers
and `composite_triggers` their combinations.  The operators themselves are in
`window_operators` (`WindowOut`, `window`, `fold_window`), `fold_operators`
(collect, count, reduce, max, min), `aggregate_operators` (sum, mean,
aggregate) and `join_operator` (`join_window`).  Users import everything
from `flowspark.operators.windowing`.
"""
