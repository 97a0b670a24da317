"""flowspark's own notices: on standard error, or wherever a task forwards them."""

from __future__ import annotations

from typing import List

import pytest

from flowspark._notices import forwarded_to, say


def test_a_notice_goes_to_standard_error(capsys: pytest.CaptureFixture[str]) -> None:
    say("flowspark: something to know")
    assert capsys.readouterr().err == "flowspark: something to know\n"


def test_a_forwarded_notice_goes_only_where_it_is_forwarded(capsys: pytest.CaptureFixture[str]) -> None:
    sent: List[str] = []
    with forwarded_to(sent.append):
        say("flowspark: to the driver")
    say("flowspark: here again")
    assert sent == ["flowspark: to the driver\n"]
    assert capsys.readouterr().err == "flowspark: here again\n"


def test_a_notice_the_driver_can_not_take_is_written_here(capsys: pytest.CaptureFixture[str]) -> None:
    def gone(line: str) -> None:
        msg = "the driver is gone"
        raise ConnectionRefusedError(msg)

    with forwarded_to(gone):
        say("flowspark: still seen")
    assert capsys.readouterr().err == "flowspark: still seen\n"
