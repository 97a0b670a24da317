"""The workers' plan, pickled once by the driver and unpickled once per Python worker and run.

On Bytewax, what a step's functions capture (a bound method's object, a
closure's model, a running window) lives in its worker for the whole run.
Spark hands every task its functions again: the source's reader and each
stateful layer's processor are pickled into every task.  They carry this
instead of the plan: the plan's bytes and the run's token.  A Spark Python
worker unpickles a run's plan the first time one of its tasks needs it,
and every later task of the run on that worker, every micro-batch, uses
the same objects.  Spark reuses its Python workers from task to task, so
captured objects are per-worker caches, as they are on Bytewax; a Python
worker that Spark replaces starts them afresh, as a restarted Bytewax
worker does.  What must outlive a restart belongs in a step's state.

A run that keeps one Bytewax worker's order (`-w 1`) has one worker on
Bytewax, whose objects see every item; Spark may still hand a later task
to another Python process.  So the driver keeps that run's steps
(`KeptSteps`): a task checks them out, and checks them back in, pickled
again, if its calls changed them; tasks of such a run run one at a time.
Steps that stop pickling (a captured object opened a connection) stay
with the Python worker that holds them, with a notice saying so.

    >>> from flowspark.dataflow import Dataflow
    >>> import flowspark.operators as op
    >>> from flowspark.testing import TestingSink, TestingSource
    >>> from flowspark.engine.plan.plan import build_plan
    >>> flow = Dataflow("doc")
    >>> op.output("out", op.input("inp", flow, TestingSource([1])), TestingSink([]))
    >>> shipped = ShippedPlan(build_plan(flow))
    >>> shipped.plan() is shipped.plan()
    True
"""

from __future__ import annotations

import io
import pickle
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple

import cloudpickle

from flowspark import _notices as notices
from flowspark.engine.plan.plan import Plan, core_steps
from flowspark.errors import FlowsparkRuntimeError

if TYPE_CHECKING:
    from flowspark.engine.reports.driver_link import DriverLink, DriverServer

KEEP_PLANS = 4
"""How many runs' plans a Python worker keeps (a warm server's workers serve run after run): the oldest goes first."""

CHECKED_TASKS = 4
"""In a run with several workers, how many of a Python worker's first tasks look for steps whose captured objects
changed (each stage's steps run in tasks of their own)."""

CHECKOUT_CALL = "steps_checkout"
"""The driver call that gives a task the kept steps, unless its worker holds their latest version."""

CHECKIN_CALL = "steps_checkin"
"""The driver call that takes the steps back from a task whose calls changed them."""

CHANGED_CALL = "steps_changed"
"""The driver call that names the steps whose captured objects a task's calls changed (several workers)."""


@dataclass
class _Held:
    """A run's plan in this Python worker; for steps the driver keeps, the version it is and its last pickle."""

    plan: Plan
    version: int = 0
    pickled: bytes = b""
    steps_as_loaded: Optional[Dict[str, bytes]] = None
    """Each step pickled as loaded, which the ends of this worker's first tasks compare with (several workers)."""
    checks_left: int = CHECKED_TASKS


_held: Dict[str, _Held] = {}
"""This Python worker's plans, by run token, oldest first."""


class ShippedPlan:
    """A plan as the driver pickled it, with the token of the run it belongs to.

    Pickling one copies the bytes, not the plan: every task that carries it
    gets the plan its Python worker already holds for the run (`plan`).
    With `kept_by_driver`, the driver's `KeptSteps` hold the steps between
    tasks.
    """

    def __init__(self, plan: Plan, kept_by_driver: bool = False) -> None:
        self.blob = _pickled(plan)
        self.run = uuid.uuid4().hex
        self.kept_by_driver = kept_by_driver

    def plan(self, link: Optional[DriverLink] = None, hands_back: bool = True) -> Plan:
        """The run's plan in this process: unpickled on first use, the same objects afterwards (for kept steps, the
        driver's latest version, through `link`).

        `hands_back=False`: the task is the run's last to call the steps (a
        batch run's last layer), so it will not `check_in` what it changed.
        """
        held = _held.get(self.run)
        if self.kept_by_driver and link is not None:
            version, blob = link.call(CHECKOUT_CALL, held.version if held is not None else -1)
            if blob is None and held is None:
                blob = self.blob  # no task changed the steps yet
            if blob is not None:
                plan: Plan = pickle.loads(blob)
                held = _Held(plan, version)
                self._hold(held)
                if hands_back:
                    # Pickled again here, as `check_in` will: the same steps give the same bytes in one process.
                    self._repickle(held, link)
        if held is None:
            held = _Held(pickle.loads(self.blob))
            if not self.kept_by_driver and link is not None:
                held.steps_as_loaded = _steps_pickled(held.plan)
            self._hold(held)
        return held.plan

    def _hold(self, held: _Held) -> None:
        _held.pop(self.run, None)
        _held[self.run] = held
        while len(_held) > KEEP_PLANS:
            del _held[next(iter(_held))]

    def check_in(self, link: DriverLink, hands_back: bool = True) -> None:
        """At a task's end: hand kept steps back to the driver if the task's calls changed them (unless it is the
        run's last, `hands_back=False`); in a run with several workers, after the first task, tell the driver which
        steps' captured objects changed."""
        held = _held.get(self.run)
        if held is not None and held.steps_as_loaded is not None:
            loaded = held.steps_as_loaded
            now = _steps_pickled(held.plan)
            changed = sorted(step_id for step_id, blob in loaded.items() if now.get(step_id, blob) != blob)
            for step_id in changed:
                del loaded[step_id]
            held.checks_left -= 1
            if held.checks_left == 0 or not loaded:
                held.steps_as_loaded = None
            if changed:
                link.call(CHANGED_CALL, changed)
        if not self.kept_by_driver or not hands_back or held is None or not held.pickled:
            return
        before = held.pickled
        if self._repickle(held, link) and held.pickled != before:
            held.version = link.call(CHECKIN_CALL, held.version, held.pickled, "")

    @staticmethod
    def _repickle(held: _Held, link: DriverLink) -> bool:
        """Pickle the held steps again; if they no longer pickle, tell the driver this worker keeps them."""
        try:
            held.pickled = _repickled(held.plan)
            return True
        except Exception as ex:
            held.pickled = b""  # this worker keeps them from now on
            link.call(CHECKIN_CALL, held.version, None, f"{type(ex).__name__}: {ex}")
            return False


class KeptSteps:
    """The driver's copy of a one-worker run's steps, as the last task that changed them left them."""

    def __init__(self, shipped: ShippedPlan) -> None:
        self._blob: Optional[bytes] = shipped.blob
        self._version = 0
        self._lock = threading.Lock()

    def register(self, server: DriverServer) -> None:
        server.register(CHECKOUT_CALL, self.check_out)
        server.register(CHECKIN_CALL, self.check_in)

    def check_out(self, known: int) -> Tuple[int, Optional[bytes]]:
        """The version and the pickled steps; no steps when the worker holds that version (or holds them for good),
        or when no task changed them yet (the worker's own copy, the `ShippedPlan`'s, is that version)."""
        with self._lock:
            unchanged = known == self._version or self._version == 0
            return self._version, None if unchanged else self._blob

    def check_in(self, based_on: int, blob: Optional[bytes], why_not: str) -> int:
        """Take a task's steps (`blob`, made from version `based_on`); without them, the steps stay in that task's
        worker (`why_not` says why); the version now current."""
        with self._lock:
            if blob is None:
                self._blob = None
                notices.say(
                    "flowspark: the steps' captured objects no longer pickle "
                    f"({why_not}); they stay in the Spark Python worker that holds them, and a task that Spark gives "
                    "another worker starts with them as they were when the run began"
                )
                return self._version
            self._version = based_on + 1
            self._blob = blob
            return self._version


class ChangedSteps:
    """The driver's notice, once per step, that a step's captured objects change in a run with several workers."""

    def __init__(self) -> None:
        self._told: Set[str] = set()
        self._lock = threading.Lock()

    def register(self, server: DriverServer) -> None:
        server.register(CHANGED_CALL, self.changed)

    def changed(self, step_ids: List[str]) -> None:
        # The flow's own step, not the core step it is made of (`flow.fill.flat_map_batch` is the map `flow.fill`).
        named = [".".join(step_id.split(".")[:2]) for step_id in step_ids]
        with self._lock:
            new = sorted({step_id for step_id in named if step_id not in self._told})
            self._told.update(new)
        for step_id in new:
            notices.say(
                f"flowspark: step {step_id!r} changes objects its functions capture; with several workers each Spark "
                "Python worker changes a copy of its own (Bytewax's worker threads share module-level objects): keep "
                "what must follow a key in its state, or run with -w 1"
            )


class _Fingerprint(cloudpickle.Pickler):  # type: ignore[misc]
    """Pickles what a step holds with classes by name: caches Python keeps on a class (`__slotnames__`, set when
    an instance is first pickled) are no change of the step's objects."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type):
            return _class_named, (f"{obj.__module__}.{obj.__qualname__}",)
        return super().reducer_override(obj)


def _class_named(name: str) -> str:
    """What a class stands for in a fingerprint (never unpickled)."""
    return name


def _steps_pickled(plan: Plan) -> Dict[str, bytes]:
    """Each core step's configuration as a fingerprint, for the steps that pickle."""
    found: Dict[str, bytes] = {}
    for step in core_steps(plan):
        out = io.BytesIO()
        try:
            _Fingerprint(out, protocol=pickle.HIGHEST_PROTOCOL).dump(step.config)
        except Exception:  # a step whose objects stopped pickling is passed over
            continue
        found[step.step_id] = out.getvalue()
    return found


def _repickled(plan: Plan) -> bytes:
    blob: bytes = cloudpickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)
    return blob


def _pickled(plan: Plan) -> bytes:
    """The plan pickled for Spark's workers; if it won't pickle, an error naming the step whose functions won't."""
    try:
        blob: bytes = cloudpickle.dumps(plan)
        return blob
    except Exception:
        for step in core_steps(plan):
            try:
                cloudpickle.dumps(step.config)
            except Exception as culprit:
                culprit.add_note(
                    "a step's functions, and what they use, are pickled to reach Spark's workers: create "
                    "locks, connections and open files inside them (or in a source's or sink's build), "
                    "not around them"
                )
                msg = f"step {step.step_id!r} can't be pickled for Spark's workers"
                raise FlowsparkRuntimeError(msg) from culprit
        raise
