"""The driver side of a flow's driver-resident inputs.

Partitions of sources that must live in the user's own process
(`Source.lives_in_driver`, as `TestingSource`) and of every `DynamicSource`
live here, exactly as in Bytewax (the others are read in Spark's tasks,
`executor_source`): they are built from resume states, polled for batches and
snapshotted here.  Spark's streaming source asks this hub, through the
driver's server (`driver_link`), for the next offset and the pieces of an
offset range, and each task fetches its piece's data.  An offset
records every partition's snapshot and item count, so Spark's checkpoint is
also the sources' recovery store, and a range the hub no longer holds (after
a restart) is read again from the start snapshot.
"""

from __future__ import annotations

import pickle
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

from flowspark.engine.plan import chunks
from flowspark.engine.plan.destinations import source_origin
from flowspark.engine.plan.line_blocks import batch_items
from flowspark.engine.plan.plan import Plan, input_ranks
from flowspark.engine.recovery import storage
from flowspark.engine.recovery.storage import Location
from flowspark.engine.reports.driver_link import DriverServer
from flowspark.engine.reports.failures import StepFailure
from flowspark.engine.reports.metrics import Count, Meter, Timing
from flowspark.engine.sources.driver_partition import (
    Batch,
    DriverPartition,
    PartData,
    Polled,
    decode_snapshot,
    encode_snapshot,
    split_batches,
)
from flowspark.engine.sources.executor_source import ReadNote, reads_in_executors
from flowspark.engine.sources.input_end import InputEnd
from flowspark.engine.sources.read_ahead import ReadAhead
from flowspark.inputs import AbortExecution, DynamicSource, FixedPartitionedSource

Offset = Dict[str, Any]
Piece = Tuple[str, int, int, int, int, int]
"""Work for one Spark task: origin name, first sequence number, the batch
number and index under which the hub keeps its pickled batches (`piece`),
the round of its first batch and its partition's rank in a round (`order`)."""


EMPTY_COOLDOWN_SECONDS = 0.001
"""How long Bytewax waits before it asks a partition again after an empty batch without a wake-up."""


@dataclass(frozen=True)
class Polling:
    """How a micro-batch reads each partition: at most `max_items` items, in at most `max_seconds` of polling.

    `epoch_per_round`: each source round is an epoch (Bytewax's zero epoch
    interval), else each micro-batch is; it says what an abort cuts short
    (`DriverInputs.latest_offset`).
    """

    max_items: int = 1_000_000
    max_seconds: float = 5.0
    epoch_per_round: bool = False


class DriverInputs:
    """Serves offsets and data to Spark's source through the driver's server; owns the partitions.

    Each source partition is split into `pieces` for Spark's tasks; a
    dynamic source gets one partition per Bytewax worker (`workers`).
    """

    def __init__(
        self,
        plan: Plan,
        server: DriverServer,
        polling: Polling,
        pieces: int,
        workers: int = 1,
        meter: Optional[Meter] = None,
    ) -> None:
        self._plan = plan
        self._meter = meter
        """Times `next_batch` and counts the items each input emits, if the run is metered."""
        self._lags: Dict[Tuple[str, str], int] = {}
        """Each `(step_id, partition)`'s items yet to read, for the partitions that can tell.

        Polled here in metered runs; an executor-read partition's comes with its task's `ReadNote`.
        """
        self._ranks = input_ranks(plan)
        self._sources = {step.step_id: step.config.source for step in plan.inputs}
        self._pieces_per_part = pieces
        self._workers = workers
        """Bytewax's worker count: how many partitions a dynamic source gets."""
        self._max_items = polling.max_items
        self._max_seconds = polling.max_seconds
        self._epoch_per_round = polling.epoch_per_round
        self._lock = threading.Lock()
        """Guards the buffers of read batches and pickled pieces."""
        self._parts_lock = threading.Lock()
        """Guards the live partitions (a read ahead uses them in its own thread)."""
        self._ahead: Optional[ReadAhead[Polled]] = None
        self._parts: Dict[str, DriverPartition] = {}
        self._keys: List[str] = []
        self._position: Optional[Offset] = None
        self._buffer: Dict[int, List[PartData]] = {}
        self._pieces: Dict[int, Tuple[List[Piece], List[bytes]]] = {}
        self._ended = False
        self._abort_after: Optional[Offset] = None
        """The offset after which the next micro-batch is the abort a poll hit (`latest_offset`)."""
        self._primed: Optional[Tuple[Offset, Offset]] = None
        """The first micro-batch, read before Spark asked (`prime`): its start and end offsets."""
        self._log: Optional[Location] = None
        """Where each micro-batch's input is kept until it is committed, for a resumed run (`keep_input_in`)."""
        self.items_read = 0
        self._remote: Dict[Tuple[str, str], Optional[float]] = {}
        """How far each executor-read partition got, as its tasks tell (`note_read`)."""
        server.register("source_read", self.note_read)
        server.register("initial_offset", self.initial_offset)
        server.register("latest_offset", self.latest_offset)
        server.register("partition_data", self.partition_data)
        server.register("piece", self.piece)
        server.register("commit", self.commit)

    def keep_input_in(self, folder: Location) -> None:
        """Keep each micro-batch's input in `folder` until Spark commits it, so that a resumed run replays it from there.

        Spark resumes by running the micro-batch its offset log holds but
        its commit log does not, with the same input.  Read again from the
        partitions' snapshots, that input may take as long to come as it
        took the first time (a live source), or never come (one that can't
        replay); kept, it is there at once.
        """
        storage.make_dirs(folder)
        self._log = folder

    # -- partitions -------------------------------------------------------

    def _part_specs(self) -> List[Tuple[str, int, str, Any, bool]]:
        specs: List[Tuple[str, int, str, Any, bool]] = []
        for i, step in enumerate(self._plan.inputs):
            source = step.config.source
            if reads_in_executors(source):
                continue
            if isinstance(source, FixedPartitionedSource):
                try:
                    names = source.list_parts()
                except Exception as ex:
                    msg = f"error listing partitions of step {step.step_id!r}"
                    raise StepFailure(msg, ex) from ex
                specs.extend((f"{i}:{n}", i, n, source, True) for n in names)
            elif isinstance(source, DynamicSource):
                # One partition per worker, as Bytewax builds them.
                specs.extend((f"{i}:*{w}", i, f"*{w}", source, False) for w in range(self._workers))
        return specs

    def has_parts(self) -> bool:
        """Whether any input lives here (else the hub is never asked for offsets)."""
        return any(not reads_in_executors(step.config.source) for step in self._plan.inputs)

    def partition_names(self) -> List[List[str]]:
        """Each driver-resident input's partition names, in input order (empty for the others)."""
        names: List[List[str]] = [[] for _ in self._plan.inputs]
        for _, i, name, _, fixed in self._part_specs():
            if fixed or name == "*0":  # a dynamic source's partitions are its workers': one entry
                names[i].append(name if fixed else "*")
        return names

    def initial_offset(self) -> Offset:
        with self._parts_lock:
            specs = self._part_specs()
            self._keys = [key for key, *_ in specs]
            return {"n": 0, "end": "", "parts": {key: {"s": encode_snapshot(None), "c": 0} for key in self._keys}}

    def _sync(self, start: Offset) -> None:
        """Make the live partitions stand at `start` (first call, or a restart)."""
        if self._position is not None and self._position == start:
            return
        for part in self._parts.values():
            part.close()
        self._parts = {}
        specs = self._part_specs()
        self._keys = [key for key, *_ in specs]
        for key, i, name, _source, fixed in specs:
            state = start["parts"].get(key)
            resume = decode_snapshot(state["s"]) if state else None
            self._parts[key] = DriverPartition(i, self._plan.inputs[i], name, resume, fixed, self._workers)
        self._position = start

    def prime(self) -> Tuple[Offset, Offset]:
        """Read the first micro-batch's input now, before Spark starts: its start and end offsets.

        A run whose input all ends in this first read can then run as one
        Spark batch query (`batch_query`); otherwise the streaming query's
        first `latest_offset` is given this read, so no partition is polled
        twice for it.
        """
        start = self.initial_offset()
        end = self.latest_offset(start)
        self._primed = (start, end)
        return start, end

    def latest_offset(self, start: Offset) -> Offset:
        """The offset after the next batch of input, read now or by the read ahead; `start` if none.

        While the sources have more waiting than one micro-batch takes
        (some partition stopped at the item limit), the batch after it is
        read ahead (`read_ahead`).
        """
        primed, self._primed = self._primed, None
        if primed is not None and primed[0] == start:
            return primed[1]
        if self._abort_after == start:
            return self._aborted(start)
        polled = self._take_ahead(start)
        with self._parts_lock:
            if polled is None:
                self._sync(start)
                if self._ended:
                    return start
                polled = self._poll()
            self.items_read += sum(polled.counts.values())
            if polled.aborted_at == 0 or (polled.aborted_at is not None and not self._epoch_per_round):
                # As in Bytewax, the epoch an abort cuts short is not a
                # resume point, and a resumed run reads it again: with an
                # epoch per round, the poll's first round, which the others'
                # batches join; with an epoch per micro-batch, the whole poll.
                return self._advance(start, InputEnd.ABORT, start["parts"], self._rounds(polled), polled.data)
            end = InputEnd.EOF if all(p.done for p in self._parts.values()) else None
            if not polled.data and end is None:
                return start
            parts = {}
            for key in self._keys:
                part = self._parts[key]
                before = start["parts"].get(key, {"c": 0})["c"]
                parts[key] = {"s": part.encoded_snapshot(), "c": before + polled.counts.get(key, 0)}
            new = self._advance(start, end, parts, self._rounds(polled), polled.data)
            if polled.aborted_at is not None:
                # With an epoch per round, the partition's batches before
                # the abort are closed epochs: they are a micro-batch of
                # their own, kept, and the abort comes alone in the next one.
                self._abort_after = new
            elif polled.backlog and end is None:
                self._ahead = ReadAhead(self._poll_ahead)
            return new

    @staticmethod
    def _rounds(polled: Polled) -> int:
        """The most batches any partition read in the poll: the source rounds the micro-batch counts for."""
        return max((len(batches) for _, _, batches in polled.data), default=0)

    def _aborted(self, start: Offset) -> Offset:
        """The micro-batch after `start` that carries only the abort, standing where `start` stands."""
        return self._advance(start, InputEnd.ABORT, start["parts"], 0, [])

    def _advance(
        self, start: Offset, end: Optional[InputEnd], parts: Dict[str, Any], rounds: int, data: List[PartData]
    ) -> Offset:
        """Record the micro-batch after `start`, with what it read, and return its offset."""
        new = {
            "n": start["n"] + 1,
            "end": "" if end is None else end.value,
            "parts": parts,
            "r": start.get("r", 0) + rounds,
        }
        if self._log is not None and data:
            storage.write_private(self._log.join(str(new["n"])), pickle.dumps(data, pickle.HIGHEST_PROTOCOL))
        with self._lock:
            self._buffer[new["n"]] = data
        self._position = new
        if end is not None:
            self._ended = True
        return new

    def _take_ahead(self, start: Offset) -> Optional[Polled]:
        """What the read ahead got, if it read on from `start`; else it is waited for and dropped."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        if self._position == start:
            return ahead.take()
        ahead.wait()  # Spark went back (a restart): `_sync` rebuilds the partitions
        return None

    def _poll_ahead(self) -> Polled:
        with self._parts_lock:
            return self._poll()

    def _poll(self) -> Polled:
        """Read each partition's batches while it is awake, up to the item limit and the poll's time.

        A partition not yet awake is passed over, not waited for: a later
        micro-batch reads it once its time has come.  One that gives an
        empty batch without a wake-up is asked again after Bytewax's
        cooldown (`EMPTY_COOLDOWN_SECONDS`), as Bytewax would within the
        epoch; a second empty batch in a row means it caught up.  So what a
        partition raises right after its last items (the end of its input,
        an abort) falls in the same micro-batch as they do.
        """
        deadline = time.monotonic() + self._max_seconds
        polled = Polled([], {}, aborted_at=None, backlog=False)
        for index, key in enumerate(self._keys):
            part = self._parts[key]
            batches: List[Batch] = []
            total = 0
            empty_before = False
            while not part.done and total < self._max_items and time.monotonic() < deadline:
                if not part.awake(datetime.now(timezone.utc)):
                    break
                started = time.perf_counter()
                try:
                    batch = part.read()
                except StopIteration:
                    part.finish()
                    break
                except AbortExecution:
                    polled.aborted_at = len(batches)
                    break
                except StepFailure:
                    raise
                except Exception as ex:
                    msg = f"error calling `next_batch` in step {part.step_id!r} for partition {part.name!r}"
                    raise StepFailure(msg, ex) from ex
                count = batch[0]
                if self._meter is not None:
                    self._meter.time(Timing.NEXT_BATCH, part.step_id, time.perf_counter() - started)
                    self._meter.count(Count.ITEMS_OUT, part.step_id, count)
                part.ask_awake()
                if count:
                    batches.append(batch)
                    total += count
                elif part.wakes_at is None:
                    if empty_before:
                        break  # caught up: the next micro-batch polls it again
                    time.sleep(EMPTY_COOLDOWN_SECONDS)
                empty_before = not count
            if batches:
                polled.data.append((part.input_index, index, batches))
                polled.counts[key] = total
            polled.backlog = polled.backlog or (total >= self._max_items and not part.done)
            if self._meter is not None and not part.done:
                self._note_lag(part)
            if polled.aborted_at is not None:
                break
        if self._meter is not None:
            self._meter.flush()
        return polled

    def partition_data(self, start: Offset, end: Offset) -> List[Piece]:
        """The pieces of the batches read between two offsets, for Spark's tasks.

        They are cut from the buffer, or from what is read again from the
        start snapshot after a restart.
        The pickled pieces stay here until the batch is committed, and each
        task fetches its own (`piece`): carried inside Spark's partitions
        they would be copied into every task and stage Spark serialises.
        """
        number = end["n"]
        with self._lock:
            cut = self._pieces.get(number)
            data = self._buffer.pop(number, None) if cut is None else None
        if cut is None:
            cut = self._cut(number, start.get("r", 0), data if data is not None else self._replay(start, end))
            with self._lock:
                cut = self._pieces.setdefault(number, cut)
        return cut[0]

    def _cut(self, number: int, first_round: int, data: List[PartData]) -> Tuple[List[Piece], List[bytes]]:
        """Each partition's batches cut into at most `pieces` runs, pickled.

        Several tasks so share a busy partition; a piece's origin and
        sequence base keep its items in order downstream.  A partition's
        `k`-th batch of the range belongs to round `first_round + k`: one
        Bytewax worker polls every partition once per round.
        """
        pieces: List[Piece] = []
        payloads: List[bytes] = []
        for input_index, index, batches in data:
            round_ = first_round
            rank = self._ranks[input_index] << 20 | index
            for piece, run in enumerate(split_batches(batches, self._pieces_per_part)):
                origin = source_origin(input_index, index, piece)
                pieces.append((origin, piece << 40, number, len(payloads), round_, rank))
                payloads.append(pickle.dumps([blob for _, blob in run], pickle.HIGHEST_PROTOCOL))
                round_ += len(run)
        return pieces, payloads

    def piece(self, number: int, index: int) -> bytes:
        """The pickled batches of one piece of batch `number` (see `partition_data`)."""
        with self._lock:
            return self._pieces[number][1][index]

    def _replay(self, start: Offset, end: Offset) -> List[PartData]:
        """The input of the micro-batch between two offsets, after a restart: as kept (`keep_input_in`), else read again."""
        kept = self._log.join(str(end["n"])) if self._log is not None else None
        if kept is not None and storage.exists(kept):
            found: List[PartData] = pickle.loads(storage.read_trusted(kept))
            return found
        return self._read_again(start, end)

    def _read_again(self, start: Offset, end: Offset) -> List[PartData]:
        data: List[PartData] = []
        for index, (key, i, name, _source, fixed) in enumerate(self._part_specs()):
            want = end["parts"].get(key, {"c": 0})["c"] - start["parts"].get(key, {"c": 0})["c"]
            if want <= 0 or not fixed:
                continue
            part = DriverPartition(i, self._plan.inputs[i], name, decode_snapshot(start["parts"][key]["s"]), fixed)
            batches: List[Batch] = []
            got = 0
            while got < want:
                try:
                    batch = part.read()
                except (StopIteration, AbortExecution):
                    break
                if batch[0] > want - got:
                    items = batch_items(batch[1])[: want - got]
                    batch = len(items), chunks.dumps_items(part.step_id, items)
                if batch[0]:
                    batches.append(batch)
                    got += batch[0]
                else:
                    time.sleep(0.01)
            part.close()
            data.append((i, index, batches))
        return data

    def _note_lag(self, part: DriverPartition) -> None:
        """Keep how many items `part` has yet to read, if it tells (a `lag()` method, as `KafkaSource`'s)."""
        tell = getattr(part.partition, "lag", None)
        if not callable(tell):
            return
        try:
            lag = tell()
        except Exception as ex:
            msg = f"error calling `lag` in step {part.step_id!r} for partition {part.name!r}"
            raise StepFailure(msg, ex) from ex
        if lag is not None:
            self._lags[part.step_id, part.name] = int(lag)

    def lags(self) -> Dict[Tuple[str, str], int]:
        """Items each `(step_id, partition)` had yet to read at its last poll, where known."""
        return dict(self._lags)

    def expect_remote(self, keys: List[Tuple[str, str]]) -> None:
        """The `(step_id, partition)` of every executor-read partition: their fractions count too."""
        self._remote = {key: None for key in keys}

    def note_read(self, note: ReadNote) -> None:
        """A task read an executor-read partition: count its items and keep how far it got and its lag.

        A source with a `note_lag(step_id, for_part, lag)` method hears the
        lag too, here in the driver (`KafkaSource` shows it in Bytewax's
        consumer-lag gauge).
        """
        self.items_read += note.items
        self._remote[note.key] = note.fraction
        if note.lag is None:
            return
        self._lags[note.key] = note.lag
        step_id, name = note.key
        tell = getattr(self._sources.get(step_id), "note_lag", None)
        if callable(tell):
            tell(step_id, name, note.lag)

    def fraction_done(self) -> Optional[float]:
        """How far the inputs got, if every partition can tell (`fraction_done()`)."""
        fractions = [f for f in self._remote.values() if f is not None]
        if len(fractions) < len(self._remote):
            return None
        for part in list(self._parts.values()):
            if part.done:
                fractions.append(1.0)
                continue
            tell = getattr(part.partition, "fraction_done", None)
            if tell is None:
                return None
            fractions.append(float(tell()))
        return sum(fractions) / len(fractions) if fractions else None

    def commit(self, end: Offset) -> None:
        """Spark finished the batch ending at `end`: drop its data and tell partitions that ask.

        A partition with a `committed(snapshot)` method learns the snapshot
        no run will ever resume before again, so it can free what came
        earlier (the spool files of `SparkSource`).
        """
        with self._lock:
            for n in [n for n in self._buffer if n <= end["n"]]:
                del self._buffer[n]
            for n in [n for n in self._pieces if n <= end["n"]]:
                del self._pieces[n]
        if self._log is not None:
            for name in storage.list_names(self._log):
                if name.isdigit() and int(name) <= end["n"]:
                    storage.remove(self._log.join(name))
        # Spark commits as it starts the next micro-batch, while the read
        # ahead may be using the partitions: wait for it only if some
        # partition needs to hear of the commit.
        told = [(key, part) for key, part in self._parts.items() if hasattr(part.partition, "committed")]
        if not told:
            return
        with self._parts_lock:
            for key, part in told:
                state = end["parts"].get(key)
                snapshot = decode_snapshot(state["s"]) if state is not None else None
                if snapshot is not None and not part.done:
                    part.partition.committed(snapshot)

    def close(self) -> None:
        """Close every partition (once a read ahead is done with them)."""
        if self._ahead is not None:
            self._ahead.wait()
        with self._parts_lock:
            for part in self._parts.values():
                if not part.done:
                    part.close()
            self._parts = {}
