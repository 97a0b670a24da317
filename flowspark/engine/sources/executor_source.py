"""Source partitions that live in Spark's executors: built, polled and snapshotted in the task that reads them.

A `FixedPartitionedSource` whose class says it need not live in the
user's process (`Source.lives_in_driver` false, as the file sources say)
is read here rather than in the driver's `DriverInputs`.  Its partitions are
listed once, on the driver, at the start of a run.  For each micro-batch
every partition still reading gets one Spark task, which builds the
partition from the snapshot the previous micro-batch left in the
`SnapshotStore`, polls it up to the item limit (or its end), writes its new
snapshot and closes it.  So the offsets Spark checkpoints are a micro-batch
counter and a few small numbers (`Position`), and no item passes through
the driver on its way in.

The planner (Spark's source runner process, `spark_source`) reads the
snapshots back to learn which partitions ended: once all have, the next
micro-batch carries only the end of the input.  A partition that raises
`AbortExecution` ends the run after the micro-batch it raised in; what it
emitted before is kept.  `DynamicSource`s and driver-resident sources stay
with the `DriverInputs`; a flow may mix both, and the offset then also holds
the hub's.

A partition that caught up (its last reading stopped at an empty batch,
with no `next_awake`) is read in every micro-batch, unless its source can
say from the planner whether there is news: a source with a method
`has_news(for_part, resume_state) -> bool` (as `KafkaSource`, which asks
the broker for the end offset) is asked instead, and the partition gets no
task until it has some.  So an idle tailing flow runs no micro-batches.
A source with a method `committed(step_id, snapshots)` hears its
partitions' snapshots each time a micro-batch is in the checkpoint
(`tell_committed`).

A partition is polled once the time its last `next_awake` answer gave has
come; as in Bytewax it is asked once built and after each batch.  The
answer outlives the task in the partition's record, but only within the run
(`ExecutorInputs.run`) that wrote it: Bytewax keeps no wake-up time in its
recovery data, and asks a resumed partition again after building it.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from flowspark._notices import say
from flowspark.engine.plan.plan import Plan
from flowspark.engine.plan.plan import reads_in_executors as reads_in_executors
from flowspark.engine.recovery.storage import Location
from flowspark.engine.reports.failures import StepFailure, aware_or_none, partition_call
from flowspark.engine.reports.metrics import Count, Meter, Timing
from flowspark.engine.sources.input_end import InputEnd, recorded_end
from flowspark.engine.sources.snapshot_store import PartRecord, SnapshotStore, part_folder
from flowspark.inputs import AbortExecution, FixedPartitionedSource

Offset = Dict[str, Any]

REPLAY_PAUSES = (0.001, 0.25)
"""How long a replay waits after an empty batch before asking again: at first, and at most (doubling between)."""


@dataclass(frozen=True)
class PartSpec:
    """One partition read in the executors."""

    index: int
    """Its place among the executor-read partitions: names its store folder's owner in tasks and orders its output."""
    input_index: int
    step_id: str
    name: str

    @property
    def folder(self) -> str:
        return part_folder(self.input_index, self.name)


@dataclass(frozen=True)
class ExecutorInputs:
    """What the planner and the tasks need to read the executor-resident partitions (picklable)."""

    parts: Tuple[PartSpec, ...]
    sources: Dict[int, FixedPartitionedSource[Any, Any]]
    """The sources, by input index."""
    store: Location
    """Where the snapshot store is (`snapshot_store`)."""
    max_items: int
    """A partition stops reading a micro-batch once it emitted this many items."""
    max_seconds: float
    """... or after this long."""
    report: bool = False
    """Tasks tell the driver what they read (`ReadNote`), for progress and metrics."""
    run: str = ""
    """Names this run of the query: a partition's recorded `next_awake` answer holds only in the run that recorded it."""

    def partition_names(self, inputs: int) -> List[List[str]]:
        """Each input's executor-read partition names, in input order (empty for the others)."""
        names: List[List[str]] = [[] for _ in range(inputs)]
        for part in self.parts:
            names[part.input_index].append(part.name)
        return names


def list_executor_inputs(
    plan: Plan, store: Location, max_items: int, max_seconds: float, report: bool
) -> ExecutorInputs:
    """List the partitions of `plan`'s executor-read sources (on the driver, once per run)."""
    parts: List[PartSpec] = []
    sources: Dict[int, FixedPartitionedSource[Any, Any]] = {}
    for i, step in enumerate(plan.inputs):
        source = step.config.source
        if not reads_in_executors(source):
            continue
        assert isinstance(source, FixedPartitionedSource)
        try:
            names = source.list_parts()
        except Exception as ex:
            msg = f"error listing partitions of step {step.step_id!r}"
            raise StepFailure(msg, ex) from ex
        sources[i] = source
        first = len(parts)
        parts.extend(PartSpec(first + k, i, step.step_id, name) for k, name in enumerate(names))
    return ExecutorInputs(tuple(parts), sources, store, max_items, max_seconds, report, run=secrets.token_hex(8))


@dataclass(frozen=True)
class Position:
    """Where the inputs stand after a micro-batch: what Spark's offset holds."""

    batch: int = 0
    """The micro-batch number (Spark's batch id + 1)."""
    round: int = 0
    """The source round of the micro-batch's first batches (`order`)."""
    since: int = 1
    """The first micro-batch of this run of the input: ends recorded before it are a finished run's."""
    end: str = ""
    """How the input ended in this micro-batch (`InputEnd`); "" while it goes on."""
    idle: Tuple[int, ...] = ()
    """The executor partitions not read in this micro-batch: ended, asleep, or all at an end."""
    hub: Optional[Offset] = None
    """The `DriverInputs`'s offset, if the flow has driver-resident sources."""
    hub_done: bool = False
    """The hub's sources ended in this run of the input (its offset's own end may be a finished run's)."""

    def offset(self) -> Offset:
        return {
            "n": self.batch,
            "r": self.round,
            "since": self.since,
            "end": self.end,
            "idle": list(self.idle),
            "hub": self.hub,
            "hub_done": self.hub_done,
        }

    @classmethod
    def of(cls, offset: Offset) -> Position:
        return cls(
            offset["n"],
            offset["r"],
            offset["since"],
            offset["end"],
            tuple(offset["idle"]),
            offset["hub"],
            offset["hub_done"],
        )


@dataclass(frozen=True)
class PartTask:
    """One Spark task's work: read partition `part` for micro-batch `batch`, its batches from round `first_round` on."""

    part: int
    batch: int
    first_round: int


def next_position(
    start: Position, inputs: ExecutorInputs, poll_hub: Optional[Callable[[Offset], Offset]], now: datetime
) -> Position:
    """The position after the next micro-batch; `start` itself if there is nothing to read yet.

    The snapshots the tasks of `start`'s micro-batch wrote say which
    partitions ended, aborted or sleep; the hub, if any, is polled too.
    After an end (a resumed run), every partition reads again.
    """
    store = SnapshotStore(inputs.store)
    fresh = bool(start.end)
    since = start.batch + 1 if fresh else start.since
    done = 0
    rounds = 0
    abort = False
    idle: List[int] = []
    for part in inputs.parts:
        found = None if fresh else store.latest(part.folder, start.batch)
        if found is None or found[0] < since:
            continue
        batch, record = found
        if batch == start.batch:
            rounds = max(rounds, record.batches)
        abort = abort or record.abort
        if record.eof:
            done += 1
            idle.append(part.index)
        elif record.run == inputs.run and record.awake is not None and record.awake > now:
            idle.append(part.index)
        elif record.caught_up and not _has_news(inputs, part, record.state):
            idle.append(part.index)
    hub = start.hub
    hub_end = InputEnd.EOF if hub is None or (start.hub_done and not fresh) else None
    if hub is not None and poll_hub is not None and not abort:
        hub = poll_hub(hub)
        if hub != start.hub and hub["end"]:
            hub_end = recorded_end(hub["end"])
    end: Optional[InputEnd] = None
    if abort or hub_end is InputEnd.ABORT:
        end = InputEnd.ABORT
    elif done == len(inputs.parts) and hub_end is InputEnd.EOF:
        end = InputEnd.EOF
    if end is not None:
        idle = [part.index for part in inputs.parts]
    elif len(idle) == len(inputs.parts) and hub == start.hub:
        return start
    return Position(
        start.batch + 1,
        start.round + rounds,
        since,
        "" if end is None else end.value,
        tuple(idle),
        hub,
        hub is not None and hub_end is InputEnd.EOF,
    )


def tick(start: Position, inputs: ExecutorInputs) -> Position:
    """The position after a micro-batch that reads nothing (`wake_ups`): every partition idle, the hub where it stood."""
    return replace(start, batch=start.batch + 1, idle=tuple(part.index for part in inputs.parts))


def _has_news(inputs: ExecutorInputs, part: PartSpec, state: Any) -> bool:
    """Whether a caught-up partition may have more to read: its source's answer (`has_news`) if it gives one."""
    ask = getattr(inputs.sources[part.input_index], "has_news", None)
    if not callable(ask):
        return True
    try:
        return bool(ask(part.name, state))
    except Exception:
        return True  # the task that reads it meets the error too, and names its step and partition


def tasks(start: Position, end: Position, inputs: ExecutorInputs) -> List[PartTask]:
    """The tasks of the micro-batch from `start` to `end`: one per partition that reads in it."""
    idle = set(end.idle)
    return [PartTask(part.index, end.batch, end.round) for part in inputs.parts if part.index not in idle]


def prune(inputs: ExecutorInputs, committed: Position) -> None:
    """Drop snapshots no run can resume from once `committed`'s micro-batch is done."""
    store = SnapshotStore(inputs.store)
    for part in inputs.parts:
        store.prune(part.folder, committed.batch)


def tell_committed(inputs: ExecutorInputs, committed: Position) -> None:
    """Hand each source that asks (`committed(step_id, snapshots)`) its partitions' snapshots as of `committed`'s
    micro-batch, now in the checkpoint.

    A source learns where a run would resume, for others to see (a
    `KafkaSource` with `commit_offsets` commits them to its consumer
    group); recovery never reads them back.
    """
    store = SnapshotStore(inputs.store)
    for index, source in inputs.sources.items():
        tell = getattr(source, "committed", None)
        if tell is None:
            continue
        parts = [part for part in inputs.parts if part.input_index == index]
        snapshots: Dict[str, Any] = {}
        for part in parts:
            found = store.latest(part.folder, committed.batch)
            if found is not None:
                snapshots[part.name] = found[1].state
        if parts and snapshots:
            tell(parts[0].step_id, snapshots)


@dataclass(frozen=True)
class ReadNote:
    """What one task read of a partition, for the driver's progress report."""

    key: Tuple[str, str]
    """`(step_id, partition name)`."""
    items: int
    fraction: Optional[float]
    """How far through its input the partition is, if it can tell (`fraction_done()`)."""
    lag: Optional[int] = None
    """Items it has yet to read, if it can tell (`lag()`, as `KafkaSource`'s partitions)."""


class PartReader:
    """Reads one partition for one micro-batch, in the task that owns it.

    Builds it from the newest earlier snapshot, polls it while it is awake
    (`batches`), then writes its snapshot and last `next_awake` answer
    (`finish`) and closes it (on leaving its `with`).
    A replay of a micro-batch that has a snapshot already stops where that
    reading did, and waits for items its source can't give yet rather than
    stop short of it.
    """

    def __init__(self, inputs: ExecutorInputs, spec: PartSpec, batch: int, meter: Optional[Meter] = None) -> None:
        self._inputs = inputs
        self._spec = spec
        self._batch = batch
        self._meter = meter
        self.items = 0
        self.batches_read = 0
        self.eof = False
        self.abort = False
        self.caught_up = False
        """Set if it stopped because it had nothing more to read for now."""
        self.recorded = True
        """Whether the store's record of the micro-batch is this reading's (`finish`)."""
        self._store = SnapshotStore(inputs.store)
        self._replay = self._store.read(spec.folder, batch)
        self._said_waiting = False
        before = self._store.latest(spec.folder, batch - 1)
        resume = None if before is None else before[1].state
        earlier = before[1] if before is not None and before[1].run == inputs.run else None
        self._told = earlier is not None
        """Whether an earlier task of this run read the partition and recorded its last `next_awake` answer."""
        self.awake = None if earlier is None else earlier.awake
        """The partition's last `next_awake` answer: it is not polled before then (`None`: right away)."""
        source = inputs.sources[spec.input_index]
        try:
            self._partition = source.build_part(spec.step_id, spec.name, resume)
        except Exception as ex:  # worded as the hub words it
            msg = f"error building partition {spec.name!r} of step {spec.step_id!r}"
            raise StepFailure(msg, ex) from ex

    def _call(self, what: str, func: Callable[..., Any], *args: Any) -> Any:
        return partition_call(self._spec.step_id, self._spec.name, what, func, *args)

    def _ask_awake(self) -> None:
        self.awake = self._call("next_awake", lambda: aware_or_none(self._partition.next_awake()))

    def batches(self) -> Iterator[List[Any]]:
        """The partition's non-empty batches for this micro-batch: none before it is awake, and none after it falls asleep."""
        replay = self._replay
        if replay is not None and replay.abort and replay.items == 0:
            return
        limit = self._inputs.max_items if replay is None else replay.items
        deadline = time.monotonic() + self._inputs.max_seconds
        if replay is None and not self._told:
            self._ask_awake()
        pause = REPLAY_PAUSES[0]
        while self.items < limit and (replay is not None or time.monotonic() < deadline):
            if replay is None and self.awake is not None and self.awake > datetime.now(timezone.utc):
                return
            started = time.perf_counter()
            try:
                batch: List[Any] = self._call("next_batch", lambda: list(self._partition.next_batch()))
            except StopIteration:
                self.eof = True
                return
            except AbortExecution:
                self.abort = True
                return
            if self._meter is not None:
                self._meter.time(Timing.NEXT_BATCH, self._spec.step_id, time.perf_counter() - started)
                self._meter.count(Count.ITEMS_OUT, self._spec.step_id, len(batch))
            if replay is None:
                self._ask_awake()
            else:
                batch = batch[: limit - self.items]
            if batch:
                self.items += len(batch)
                self.batches_read += 1
                yield batch
            elif replay is None and self.awake is None:
                self.caught_up = True
                return
            elif replay is not None:
                pause = self._wait_in_replay(pause, deadline, limit)

    def _wait_in_replay(self, pause: float, deadline: float, limit: int) -> float:
        """Wait `pause` before asking again for items a replay still lacks (saying so once its reading's time is up);
        the next pause.

        A replay gives every item the first reading gave, never fewer: the
        snapshot the next micro-batch resumes from comes after them all.  A
        source that holds them but can't give them yet (a lost executor's
        reading replayed while its Kafka broker is down) is waited for.
        """
        if not self._said_waiting and time.monotonic() > deadline:
            self._said_waiting = True
            say(
                f"flowspark: replaying micro-batch {self._batch} of partition {self._spec.name!r} of step "
                f"{self._spec.step_id!r}, which gives {self.items} of the {limit} items it gave before so far; "
                "waiting for the rest, nothing is lost"
            )
        time.sleep(pause)
        return min(pause * 2, REPLAY_PAUSES[1])

    def finish(self) -> ReadNote:
        """Write the partition's snapshot for this micro-batch (unless a reading did already).

        Sets `recorded`: false if another attempt of the task, reading at
        the same time, recorded its own reading first.  What this one read
        may then differ from the record (a source that reads "up to" what
        is there), so its items must not be used: read again, as a replay.
        """
        state = self._call("snapshot", self._partition.snapshot)
        record = PartRecord(
            state, self.items, self.batches_read, self.eof, self.abort, self.awake, self.caught_up, self._inputs.run
        )
        if self._replay is None:
            self.recorded = self._store.write_once(self._spec.folder, self._batch, record)
        fraction: Optional[float] = 1.0 if self.eof else None
        tell = getattr(self._partition, "fraction_done", None)
        if fraction is None and callable(tell):
            fraction = float(self._call("fraction_done", tell))
        lag: Optional[int] = None
        ask = getattr(self._partition, "lag", None)
        if callable(ask):
            told = self._call("lag", ask)
            lag = None if told is None else int(told)
        return ReadNote((self._spec.step_id, self._spec.name), self.items, fraction, lag)

    def close(self) -> None:
        self._call("close", self._partition.close)

    def __enter__(self) -> PartReader:
        return self

    def __exit__(self, kind: Optional[type], error: Optional[BaseException], tb: Any) -> None:
        if error is None:
            self.close()
            return
        try:  # the reading's own error is the one to raise
            self.close()
        except Exception as also:
            error.add_note(f"closing the partition afterwards also failed: {also!r}")
