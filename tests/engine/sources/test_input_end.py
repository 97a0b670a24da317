"""The end of input: the offset log's text and the marker rows it stands for."""

from __future__ import annotations

from flowspark.engine.plan import chunks
from flowspark.engine.sources.input_end import InputEnd, recorded_end


def test_offset_logs_keep_their_text() -> None:
    assert [end.value for end in InputEnd] == ["eof", "abort"]
    assert recorded_end("") is None
    assert recorded_end("eof") is InputEnd.EOF
    assert recorded_end("abort") is InputEnd.ABORT


def test_each_end_has_its_own_marker_row() -> None:
    assert InputEnd.EOF.marker == chunks.EOF
    assert InputEnd.ABORT.marker == chunks.ABORT
