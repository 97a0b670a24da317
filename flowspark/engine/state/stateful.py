"""`stateful_batch` steps inside Spark's `transformWithState`.

One processor serves one *layer* of stateful steps.  Spark groups rows by
`grp`; a stateful step's group is one bucket of its keys (`groups`),
so the shuffle and the state operator see a few hundred chunk rows per
micro-batch whatever the number of items or keys.  Inside a bucket each
key's pickled logic snapshot and `notify_at` are stored together, in slots
of many keys each (`keyed_state`), and Spark's processing-time timers wake the
bucket when a slot's earliest wake-up is due.  Rows bound for later layers,
outputs or the driver pass through unchanged.  The dynamic sinks placed in
the task that makes their items are written by the layer's task, and their
partitions closed when the task ends (`task_sinks`).

A bucket's micro-batch is handled tick by tick (`order`), as one Bytewax
worker's activations would handle it: each key's values of a round in one
`on_batch`, keys in sorted order, then the keys whose wake-up fell due.
Logics that declare `MERGE_BATCHES` instead get all of a key's values at
once, unless the run keeps one worker's order.
"""

from __future__ import annotations

import heapq
import itertools
import time
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from flowspark.engine.plan import chunks
from flowspark.engine.plan.destinations import CONTROL_GROUP, DestinationKind, parse
from flowspark.engine.plan.groups import Groups
from flowspark.engine.plan.keyed_chunks import Arrivals
from flowspark.engine.plan.order import EOF_ROUND, START_ROUND, batch_phase, notify_phase
from flowspark.engine.plan.plan import stateful_ranks
from flowspark.engine.plan.route import Collector, Router
from flowspark.engine.plan.shipped_plan import ShippedPlan
from flowspark.engine.plan.task_sinks import TaskSinks
from flowspark.engine.reports.driver_link import DriverLink
from flowspark.engine.reports.failures import StepFailure, aware_or_none, guarded, reported_to, unloadable_items
from flowspark.engine.reports.metrics import LOGIC_TIMINGS, Meter, Reading, Timing, worker_index
from flowspark.engine.state import keyed_state
from flowspark.engine.util.cyclic_gc import collector_paused, freeze_start_up_objects

SLOT_GROUP = 64
"""How many slots' keys a micro-batch handles before saving them and letting them go."""

_seq = itertools.count()
"""Orders the rows this worker emits: rows of one group come from one worker."""


def _emits(step_id: str, method: str, key: str, result: Any) -> Tuple[List[Any], bool]:
    """Check a logic's `(emit, discard)` result the way Bytewax does."""
    if not isinstance(result, tuple) or len(result) != 2:
        msg = f"`{method}` in step {step_id!r} must return a 2-tuple of `(emit, discard)`; got {result!r}"
        failed = f"error calling `{method}` in step {step_id!r} for key {key!r}"
        raise StepFailure(failed, TypeError(msg))
    emit, discard = result
    if isinstance(emit, (str, bytes)) or not isinstance(emit, Iterable):
        msg = f"`{method}` in step {step_id!r} must return an iterable `emit`; `emit` was not a `list`: got a {type(emit)!r}"
        failed = f"error calling `{method}` in step {step_id!r} for key {key!r}"
        raise StepFailure(failed, TypeError(msg))
    return list(emit), bool(discard)


def _epoch_ms(at: datetime, step_id: str, key: str) -> int:
    try:
        aware_or_none(at)
    except TypeError as ex:
        msg = f"error calling `notify_at` in step {step_id!r} for key {key!r}"
        raise StepFailure(msg, ex) from ex
    return int(at.timestamp() * 1000)


StateFunction = Callable[[Optional[Any], List[Any]], Tuple[List[Any], Optional[Any]]]
"""A step's whole logic as `(state, values) -> (emitted, state left)`; a state left of None discards the key."""


def state_function(logic: Any) -> Optional[StateFunction]:
    """The state function a logic offers for its whole step, if any.

    A logic may offer one when it never asks to be woken, does nothing at
    the end of input and snapshots as its state (`stateful_map`'s): the
    runtime then keeps each key's state, and builds no logic per key.
    """
    offer = getattr(logic, "state_function", None)
    found: Optional[StateFunction] = offer() if callable(offer) else None
    return found


class _Bucket:
    """The live logics of one bucket of keys during one handler call.

    Their snapshots and wake-ups are read from and written to the bucket's
    `SlottedState`: a key is read at most once per call, and the end of
    input reads the whole bucket in one scan (every key's `on_eof` needs
    its snapshot).
    """

    def __init__(
        self,
        step_id: str,
        builder: Callable[[Any], Any],
        state: keyed_state.SlottedState,
        meter: Optional[Meter] = None,
    ) -> None:
        self.step_id = step_id
        self._meter = meter
        self._builder = builder
        self._state = state
        self._live: Dict[str, Any] = {}
        self._resume: Dict[str, Any] = {}
        self._touched: Set[str] = set()
        self._checked: Set[str] = set()
        self._wake_at: Dict[str, Optional[int]] = {}

    def _load(self, key: str) -> None:
        """Read `key`'s snapshot and wake-up, once per call."""
        if key not in self._resume:
            self._loaded(key, self._state.get(key))

    def _loaded(self, key: str, stored: Optional[keyed_state.Stored]) -> None:
        """Keep what was read for `key`: its snapshot and wake-up."""
        self._resume[key], self._wake_at[key] = (None, None) if stored is None else stored

    def logic(self, key: str) -> Any:
        if key in self._live and self._live[key] is not None:
            return self._live[key]
        resume = None
        if key not in self._live:
            self._load(key)
            resume = self._resume[key]
        logic = guarded(self.step_id, "builder", self._builder, resume, key=key)
        self._live[key] = logic
        return logic

    def call(self, key: str, method: str, *args: Any) -> List[Tuple[str, Any]]:
        """Run one logic method for `key`; return what it emits, keyed."""
        logic = self.logic(key)
        started = time.perf_counter()
        result = guarded(self.step_id, method, getattr(logic, method), *args, key=key)
        emit, discard = _emits(self.step_id, method, key, result)
        if self._meter is not None:
            self._meter.time(LOGIC_TIMINGS[method], self.step_id, time.perf_counter() - started)
            self._meter.passed(self.step_id, len(args[0]) if args else 0, len(emit))
        self._touched.add(key)
        if discard:
            self._live[key] = None
        return [(key, value) for value in emit]

    def fold(self, slot: int, key: str, fold: StateFunction, values: List[Any]) -> List[Tuple[str, Any]]:
        """Run a step's state function (see `state_function`) for `key` of `slot`; return what it emits, keyed.

        The state left goes straight to the bucket's state, to be written by
        `persist`.
        """
        resume = self._state.key_slot(slot).snapshots.get(key)
        started = time.perf_counter()
        emits, left = guarded(self.step_id, "on_batch", fold, resume, values, key=key)
        if self._meter is not None:
            self._meter.time(LOGIC_TIMINGS["on_batch"], self.step_id, time.perf_counter() - started)
            self._meter.passed(self.step_id, len(values), len(emits))
        if left is None:
            self._state.remove_in(slot, key)
        else:
            self._state.put_in(slot, key, left, None)
        return [(key, value) for value in emits]

    def overdue(self, key: str, now_ms: int) -> bool:
        """Whether `key`'s wake-up passed before this batch began (checked once per call).

        Spark runs expired timers after the batch's new rows; a logic must
        see its `on_notify` first, as it would have had the batch come later.
        """
        if key in self._checked:
            return False
        self._checked.add(key)
        self._load(key)
        at = self._wake_at[key]
        return at is not None and at <= now_ms

    def asks_wake_at(self, key: str) -> Optional[int]:
        """When `key`'s live logic asks to be woken now, in epoch ms; None for never (or no live logic)."""
        logic = self._live.get(key)
        if logic is None:
            return None
        at = guarded(self.step_id, "notify_at", logic.notify_at, key=key)
        return None if at is None else _epoch_ms(at, self.step_id, key)

    def stored_keys(self) -> List[str]:
        """Every key with a logic now, in order; their snapshots are read in the same single scan."""
        keys: Set[str] = set()
        for key, stored in self._state.items():
            keys.add(key)
            if key not in self._resume:
                self._loaded(key, stored)
        keys.update(k for k, v in self._live.items() if v is not None)
        keys.difference_update(k for k, v in self._live.items() if v is None)
        return sorted(keys)

    def slot_groups(self, keys: List[str]) -> Iterator[List[Tuple[int, str]]]:
        """`keys` (sorted) with their slots, in groups that each fall in at most `SLOT_GROUP` slots, in slot order.

        Within a slot the keys keep their order.
        """
        slot_count = self._state.slot_count
        by_slot: Dict[int, List[str]] = {}
        for key in keys:
            slot = keyed_state.slot_of(key, slot_count)
            found = by_slot.get(slot)
            if found is None:
                by_slot[slot] = [key]
            else:
                found.append(key)
        slots = sorted(by_slot)
        for start in range(0, len(slots), SLOT_GROUP):
            yield [(slot, key) for slot in slots[start : start + SLOT_GROUP] for key in by_slot[slot]]

    def keys_by_slot(self) -> Iterator[List[str]]:
        """The bucket's keys, one slot's (sorted) at a time; each slot is read only when its turn comes."""
        for slot in self._state.slot_ids():
            found = self._state.key_slot(slot)
            for key, snapshot in found.snapshots.items():
                self._loaded(key, keyed_state.Stored(snapshot, found.wakes.get(key)))
            yield sorted(found.snapshots)

    def due_keys(self, now_ms: int) -> List[str]:
        return self._state.due(now_ms)

    @property
    def group(self) -> str:
        """The bucket's Spark group."""
        return self._state.bucket

    def earliest(self) -> Optional[int]:
        """The bucket's earliest wake-up as saved (epoch ms), None for none."""
        return self._state.earliest()

    def persist(self, handle: StatefulProcessorHandle, now_ms: int) -> None:
        """Store the snapshot and next wake-up of every key that ran.

        A wake-up at or before `now_ms` (the batch's time) means "as soon as
        possible", which Bytewax serves at the key's next activation: here,
        the next micro-batch.  Storing it as `now_ms + 1` keeps Spark from
        calling the bucket again within this batch.
        """
        for key in self._touched:
            logic = self._live[key]
            if logic is None:
                self._state.remove(key)
                continue
            snap = guarded(self.step_id, "snapshot", logic.snapshot, key=key)
            started = time.perf_counter()
            at = guarded(self.step_id, "notify_at", logic.notify_at, key=key)
            if self._meter is not None:
                self._meter.time(Timing.NOTIFY_AT, self.step_id, time.perf_counter() - started)
            at_ms = None if at is None else max(_epoch_ms(at, self.step_id, key), now_ms + 1)
            self._state.put(key, snap, at_ms)
        self._state.save(handle.registerTimer)
        self._forget()

    def _forget(self) -> None:
        """Let go of every key handled so far: each is saved, and a discarded key is not built again."""
        discarded = {key for key, logic in self._live.items() if logic is None}
        self._live = dict.fromkeys(discarded)
        for known in (self._resume, self._wake_at):
            known.clear()
        self._resume.update(dict.fromkeys(discarded))
        self._touched.clear()


class LayerProcessor(StatefulProcessor):
    """Runs the stateful steps of one layer, and the stateless steps after them.

    Spark pickles the processor into every task; it carries the plan as
    shipped (`shipped_plan`), so that the steps' objects live as long as
    the Python worker that runs them.
    """

    def __init__(
        self,
        shipped: ShippedPlan,
        layer: int,
        groups: Groups,
        link: DriverLink,
        metered: bool = False,
        hands_back: bool = True,
    ) -> None:
        self._shipped = shipped
        self._layer = layer
        self._link = link
        self._groups = groups
        self._metered = metered
        """Count the steps' items and report them to the driver once per task (`close`)."""
        self.hands_back = hands_back
        """Hand the steps back to the driver at the task's end (`ShippedPlan.check_in`): not in a batch run's last
        layer, after which nothing calls them."""
        self._batch_phase = batch_phase(layer)
        self._notify_phase = notify_phase(layer)

    def init(self, handle: StatefulProcessorHandle) -> None:
        freeze_start_up_objects()
        self._plan = self._shipped.plan(self._link, self.hands_back)
        self._steps = set(self._plan.steps_in_layer(self._layer))
        self._ranks = stateful_ranks(self._plan)
        """Each stateful step's place among what a tick of its layer emits (`plan.stateful_ranks`)."""
        self._handle = handle
        self._state = keyed_state.state_variables(handle)
        self._meter = Meter(self._report) if self._metered else None
        self._sinks = TaskSinks(self._plan, self._meter)
        self._router = Router(self._plan, self._groups, self._meter, self._sinks)

    def _mine(self, grp: str) -> Optional[int]:
        dest = parse(grp)
        if dest.kind is not DestinationKind.STATEFUL:
            return None
        return dest.index if dest.index in self._steps else None

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:  # noqa: N802, N803 - Spark's names
        grp = key[0]
        step = self._mine(grp)
        if step is None:
            for seq, kind, payload in sorted(((r.seq, r.kind, r.payload) for r in rows), key=lambda r: r[0]):
                yield Row(grp=grp, seq=seq, kind=kind, payload=payload)
            return
        # The batch's values are all freed inside `_run`, before the
        # collector is back on: it would otherwise walk every one of them.
        with self._work():
            finished = self._run(step, grp, rows, timerValues.getCurrentProcessingTimeInMs())
        yield from finished

    @contextmanager
    def _work(self) -> Iterator[None]:
        """Run user code: a failure is reported to the driver and closes the sink partitions the task built."""
        try:
            with reported_to(self._link), collector_paused():
                yield
        except BaseException as error:
            self._sinks.abandon(error)
            raise

    def _run(self, step: int, grp: str, rows: Iterator[Row], now_ms: int) -> List[Row]:
        """Feed a bucket's rows of one micro-batch to its keys' logics; the rows they emit."""
        ordered = sorted(((r.seq, r.kind, r.payload) for r in rows), key=lambda r: r[0])
        bucket, out = self._open(step, grp)
        arrivals = Arrivals()
        try:
            for _, kind, payload in ordered:
                if kind == chunks.DATA:
                    arrivals.add(payload)
        except Exception as ex:  # an item whose class pickles but won't load (a `__reduce__` that raises)
            msg = f"error unpickling the items that reached step {self._plan.stateful[step].step_id!r}"
            raise unloadable_items(msg, ex) from ex
        keys = arrivals.keys()
        # A step's logics are all of one class: the first key's tells.
        if keys and not self._plan.ordered and getattr(bucket.logic(keys[0]), "MERGE_BATCHES", False):
            self._merged(step, bucket, keys, arrivals, out, now_ms)
        else:
            for k in keys:
                if bucket.overdue(k, now_ms):
                    self._call(step, bucket, k, "on_notify", (START_ROUND, self._notify_phase), out)
            self._by_rounds(step, bucket, arrivals, out)
        aborted = any(kind == chunks.ABORT for _, kind, _ in ordered)
        if any(kind == chunks.EOF for _, kind, _ in ordered):
            self._end_of_input(step, bucket, out, now_ms, saving=not aborted)
        if aborted:
            # As in Bytewax, the epoch an abort cut short is not kept: a
            # resumed run reads its input again from the state before it.
            return self._rows(out)
        return self._finish(bucket, out, now_ms)

    def _end_of_input(self, step: int, bucket: _Bucket, out: Collector, now_ms: int, saving: bool) -> None:
        """Call `on_eof` for every key of the bucket.

        Keeping one worker's order means sorted keys across the bucket.
        Otherwise the bucket goes slot by slot, each slot's keys saved and
        let go before the next is read, so that the end of input needs no
        more memory than one slot's keys, and a step with a state function
        (`state_function`) stops at its first key.  A micro-batch that an
        abort cut short saves nothing, so it takes the first way.
        """
        tick = (EOF_ROUND + self._plan.eof_delays[step], self._batch_phase)
        if self._plan.ordered or not saving:
            self._calls(step, bucket, bucket.stored_keys(), "on_eof", tick, out)
            return
        bucket.persist(self._handle, now_ms)
        for keys in bucket.keys_by_slot():
            if state_function(bucket.logic(keys[0])) is not None:
                return  # such logics do nothing at the end of input
            self._calls(step, bucket, keys, "on_eof", tick, out)
            bucket.persist(self._handle, now_ms)

    def handleExpiredTimer(  # noqa: N802 - Spark's name
        self,
        key: Any,
        timerValues: TimerValues,  # noqa: N803 - Spark's name
        expiredTimerInfo: ExpiredTimerInfo,  # noqa: N803 - Spark's name
    ) -> Iterator[Row]:
        grp = key[0]
        step = self._mine(grp)
        if step is None:
            return iter(())
        with self._work():
            bucket, out = self._open(step, grp)
            now_ms = timerValues.getCurrentProcessingTimeInMs()
            self._calls(step, bucket, bucket.due_keys(now_ms), "on_notify", (START_ROUND, self._notify_phase), out)
            return iter(self._finish(bucket, out, now_ms))

    def _open(self, step: int, grp: str) -> Tuple[_Bucket, Collector]:
        config = self._plan.stateful[step].config
        step_id = self._plan.stateful[step].step_id
        bucket = _Bucket(step_id, config.builder, keyed_state.SlottedState(self._state, grp, step_id), self._meter)
        return bucket, Collector(grp, self._link, self._plan.ordered)

    def _merged(
        self, step: int, bucket: _Bucket, keys: List[str], arrivals: Arrivals, out: Collector, now_ms: int
    ) -> None:
        """Feed each key all its values of the micro-batch in one `on_batch` (after its overdue `on_notify`).

        For logics that declare `MERGE_BATCHES` (their output does not
        depend on batch boundaries) when no worker's order is to be kept:
        one call per key instead of one per key and round.  Keys go a group
        of slots at a time, each group saved and let go before the next is
        read, so a micro-batch needs memory for its own items, not for the
        bucket's state.  What the keys emit goes on down the flow in batches
        of about `chunks.PIECE_ITEMS`, so each step below runs once per
        batch rather than once per key.
        """
        tick = (START_ROUND, self._batch_phase)
        fold = state_function(bucket.logic(keys[0]))
        keyed: List[Tuple[str, Any]] = []
        values = arrivals.by_key()
        for group in bucket.slot_groups(keys):
            for slot, k in group:
                if fold is not None:
                    keyed.extend(bucket.fold(slot, k, fold, values[k]))
                else:
                    if bucket.overdue(k, now_ms):
                        self._call(step, bucket, k, "on_notify", (START_ROUND, self._notify_phase), out)
                    keyed.extend(bucket.call(k, "on_batch", values[k]))
                if len(keyed) >= chunks.PIECE_ITEMS:
                    self._push(step, keyed, tick, out)
                    keyed = []
            bucket.persist(self._handle, now_ms)
        if keyed:
            self._push(step, keyed, tick, out)

    def _push(self, step: int, keyed: List[Tuple[str, Any]], tick: Tuple[int, int], out: Collector) -> None:
        """Pass what several keys emitted on as one run at `tick` (for runs that keep no key order)."""
        self._router.push(self._plan.stateful[step].config.downs[0], keyed, out)
        out.end_run((tick[0], tick[1], self._ranks[step], ""))
        out.take()

    def _by_rounds(self, step: int, bucket: _Bucket, arrivals: Arrivals, out: Collector) -> None:
        """Handle the micro-batch one tick at a time, as one Bytewax worker's activations do.

        Per tick, each key with values gets one `on_batch` (keys in sorted
        order); then every key that ran in this micro-batch and whose
        `notify_at` (asked after its last call, as Bytewax does) is due by
        now gets `on_notify`, before the next tick.  Wake-ups still ahead at
        the end are left to Spark's timers (`persist`).
        """
        wakes: Dict[str, int] = {}
        soonest: List[Tuple[int, str]] = []
        """A heap of `(wake-up, key)`; entries that `wakes` no longer holds are stale."""

        def ran(key: str) -> None:
            at = bucket.asks_wake_at(key)
            if at is None:
                wakes.pop(key, None)
            elif wakes.get(key) != at:
                wakes[key] = at
                heapq.heappush(soonest, (at, key))

        for (round_, _), per_key in arrivals.by_tick():
            for k in sorted(per_key):
                self._call(step, bucket, k, "on_batch", (round_, self._batch_phase), out, per_key[k])
                ran(k)
            now_ms = int(time.time() * 1000)
            due: Set[str] = set()
            while soonest and soonest[0][0] <= now_ms:
                at, k = heapq.heappop(soonest)
                if wakes.get(k) == at:
                    del wakes[k]
                    due.add(k)
            for k in sorted(due):
                self._call(step, bucket, k, "on_notify", (round_, self._notify_phase), out)
                ran(k)
            out.take()

    def _call(
        self, step: int, bucket: _Bucket, key: str, method: str, tick: Tuple[int, int], out: Collector, *args: Any
    ) -> None:
        """Run one logic method and pass its output on as one run placed at `tick` and `key`."""
        self._router.push(self._plan.stateful[step].config.downs[0], bucket.call(key, method, *args), out)
        out.end_run((tick[0], tick[1], self._ranks[step], key if self._plan.ordered else ""))

    def _calls(
        self, step: int, bucket: _Bucket, keys: List[str], method: str, tick: Tuple[int, int], out: Collector
    ) -> None:
        """Run one logic method for each of `keys` (sorted); a run per key if order is kept, else one for all."""
        if self._plan.ordered:
            for k in keys:
                self._call(step, bucket, k, method, tick, out)
            out.take()
            return
        self._push(step, [kv for k in keys for kv in bucket.call(k, method)], tick, out)

    def _finish(self, bucket: _Bucket, out: Collector, now_ms: int) -> List[Row]:
        """Save the bucket's state; the rows of what its keys emitted, and the bucket's report of its earliest
        wake-up (`wake_ups`)."""
        bucket.persist(self._handle, now_ms)
        report = Row(
            grp=CONTROL_GROUP,
            seq=next(_seq),
            kind=chunks.WAKE_UPS,
            payload=chunks.dumps({bucket.group: bucket.earliest()}),
        )
        return self._rows(out) + [report]

    def _rows(self, out: Collector) -> List[Row]:
        return [Row(grp=grp, seq=seq, kind=kind, payload=payload) for grp, seq, kind, payload in out.rows(_seq)]

    def _report(self, reading: Reading) -> None:
        self._link.call("metrics", worker_index(), reading)

    def close(self) -> None:
        with self._work():
            self._sinks.close()
        self._shipped.check_in(self._link, self.hands_back)
        if self._meter is not None:
            self._meter.flush()
