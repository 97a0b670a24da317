"""Bytewax's operators, on Spark.

The core operators (`input`, `output`, `flat_map_batch`, `stateful_batch`,
`branch`, `merge`, `redistribute`, `inspect_debug`) are what the planner
translates; everything else here is composed from them in plain Python.
Bytewax's type variables (`X`, `Y`, `U`, `V`, `W`, `W_co`, `S`, `DK`, `DV`)
and `_EMPTY` are importable from here too, as Bytewax's own plugins do:

    >>> from flowspark.operators import KeyedStream, V
"""

from flowspark._batch_logic import _EMPTY as _EMPTY
from flowspark._batch_logic import StatefulBatchLogic
from flowspark.dataflow import Dataflow, KeyedStream, Stream, f_repr, operator
from flowspark.inputs import Source
from flowspark.operators._core import (
    BranchOut,
    branch,
    flat_map_batch,
    input,  # noqa: A004 - Bytewax's operator name
    inspect_debug,
    merge,
    output,
    redistribute,
    stateful_batch,
)
from flowspark.operators._core import S as S
from flowspark.operators._core import V as V
from flowspark.operators._core import W as W
from flowspark.operators._core import W_co as W_co
from flowspark.operators._core import X as X
from flowspark.operators._core import Y as Y
from flowspark.operators._enrich import DK as DK
from flowspark.operators._enrich import DV as DV
from flowspark.operators._enrich import TTLCache, enrich_cached
from flowspark.operators._final import _FoldFinalLogic, count_final, fold_final, max_final, min_final, reduce_final
from flowspark.operators._join import JoinEmitMode, JoinInsertMode, join
from flowspark.operators._join import JoinState as _JoinState
from flowspark.operators._join import U as U
from flowspark.operators._stateful import (
    StatefulLogic,
    _CollectLogic,
    _CollectState,
    _StatefulFlatMapLogic,
    collect,
    stateful,
    stateful_flat_map,
    stateful_map,
)
from flowspark.operators._stateless import (
    filter,  # noqa: A004 - Bytewax's operator name
    filter_map,
    filter_map_value,
    filter_value,
    flat_map,
    flat_map_value,
    flatten,
    inspect,
    key_on,
    key_rm,
    map,  # noqa: A004 - Bytewax's operator name
    map_value,
    raises,
)
from flowspark.outputs import DynamicSink, Sink, StatelessSinkPartition

__all__ = [
    "BranchOut",
    "JoinEmitMode",
    "JoinInsertMode",
    "KeyedStream",
    "StatefulBatchLogic",
    "StatefulLogic",
    "TTLCache",
    "branch",
    "collect",
    "count_final",
    "enrich_cached",
    "filter",
    "filter_map",
    "filter_map_value",
    "filter_value",
    "flat_map",
    "flat_map_batch",
    "flat_map_value",
    "flatten",
    "fold_final",
    "input",
    "inspect",
    "inspect_debug",
    "join",
    "key_on",
    "key_rm",
    "map",
    "map_value",
    "max_final",
    "merge",
    "min_final",
    "output",
    "raises",
    "redistribute",
    "reduce_final",
    "stateful",
    "stateful_batch",
    "stateful_flat_map",
    "stateful_map",
]

# Bytewax 0.21.1's module also holds `Dataflow`, `Stream`, `operator`,
# `f_repr`, `Source`, `Sink`, `DynamicSink` and `StatelessSinkPartition`
# (imported above, for code that imports them from here), and its private
# logic and state classes keep their names here
# (outside `__all__`), for code, and Bytewax's own unit tests, that build
# them directly: `_CollectLogic`, `_CollectState`, `_FoldFinalLogic`,
# `_JoinState`, `_StatefulFlatMapLogic`.
