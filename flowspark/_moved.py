r"""The modules that moved, still importable by their old names: a pickle written before a move must still load.

State, offsets and sink snapshots a run keeps in its recovery directory are
pickles, and a pickle names each class by its module.  A module that moves
stays importable under its old name, as the very same module object (so
`pickle` finds the class, and `isinstance` holds), loaded only when the old
name is imported.  `install` puts the finder on `sys.meta_path`;
`flowspark/__init__.py` calls it.

    >>> import pickle
    >>> from flowspark._step_config import StepKind
    >>> pickle.loads(b"cflowspark.step_config\nStepKind\n.") is StepKind
    True
"""

from __future__ import annotations

import importlib
import sys
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Dict, Optional, Sequence

MOVED: Dict[str, str] = {
    # 0.2: the engine's folders as floors (issue 47)
    "flowspark.engine.plan.gc_pause": "flowspark.engine.util.cyclic_gc",
    "flowspark.engine.shutdown": "flowspark.engine.util.shutdown",
    "flowspark.engine.recovery.private_files": "flowspark.engine.util.private_files",
    "flowspark.engine.connect.client_environment": "flowspark.engine.util.client_environment",
    "flowspark.engine.sources.spark_format": "flowspark.engine.sources.data_source",
    "flowspark.engine.spark.run_spark": "flowspark.engine.run_spark",
    "flowspark.engine.spark.warm_up": "flowspark.engine.warm_up",
    "flowspark.engine.sinks.pass_sinks": "flowspark.engine.plan.task_sinks",
    "flowspark.engine.sinks.sink_ledger": "flowspark.engine.recovery.sink_ledger",
    # 0.2: engine modules named for what they implement
    "flowspark.engine.sources.source_hub": "flowspark.engine.sources.driver_inputs",
    "flowspark.engine.sinks.write_behind": "flowspark.engine.sinks.async_write",
    "flowspark.engine.state.slots": "flowspark.engine.state.keyed_state",
    "flowspark.engine.state.slot_cache": "flowspark.engine.state.keyed_state_cache",
    "flowspark.engine.state.batch_state": "flowspark.engine.state.memory_state",
    "flowspark.engine.sinks.sink_batch": "flowspark.engine.sinks.batch_id",
    "flowspark.engine.connect.python_forks": "flowspark.engine.spark.fork_server",
    "flowspark.engine.connect.forked_python": "flowspark.engine.spark.forked_python",
    # 0.2: only Bytewax's public modules at the top
    "flowspark.launch": "flowspark._launch",
    "flowspark.locate": "flowspark._locate",
    "flowspark.notices": "flowspark._notices",
    "flowspark.settings": "flowspark._settings",
    "flowspark.step_config": "flowspark._step_config",
    "flowspark.batch_logic": "flowspark._batch_logic",
    "flowspark.dataflow_api": "flowspark._dataflow_api",
    "flowspark.spark_plan": "flowspark.engine.plan.physical_plan",
}
"""Old module name to where it lives now."""


class _Alias(Loader):
    """Loads an old name as the module it moved to."""

    def __init__(self, target: str) -> None:
        self._target = target
        self._own_spec: Optional[ModuleSpec] = None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = importlib.import_module(self._target)
        self._own_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the module ran when imported by its own name); give it back its own spec, which the import
        system just replaced with the old name's."""
        module.__spec__ = self._own_spec


class MovedModules(MetaPathFinder):
    """Finds the old names in `MOVED`, after every other finder failed to."""

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[ModuleSpec]:
        moved = MOVED.get(fullname)
        return None if moved is None else ModuleSpec(fullname, _Alias(moved))


def install() -> None:
    """Make the old names importable (once per process)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
