"""How a stateful step's key state is stored: its snapshot with its wake-up, and the older form."""

from __future__ import annotations

from flowspark.engine import chunks
from flowspark.engine.stateful import packed, unpacked


def test_stored_snapshots_carry_their_wake_up_and_older_ones_still_read() -> None:
    snap = {"windows": [1, 2]}
    assert unpacked(packed(chunks.dumps(snap), 1_700_000_000_123)) == (snap, 1_700_000_000_123, True)
    assert unpacked(packed(chunks.dumps(snap), None)) == (snap, None, True)
    assert unpacked(chunks.dumps(snap)) == (snap, None, False)  # as stored before wake-ups moved in
    big = list(range(chunks.PIECE_ITEMS * 2))
    assert unpacked(packed(chunks.dumps(big), 5))[0] == big
