"""What a failure said, as the tests read it: an error's chain of messages, the command line's usage error.

Tests assert on the words a user sees; these collect them from a raised
error and its causes, or from what argparse printed as it stopped.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

import pytest


def error_chain(error: BaseException) -> List[str]:
    """The messages of `error` and of the errors it was raised from, outermost first."""
    chain: List[str] = []
    cause: Optional[BaseException] = error
    while cause is not None:
        chain.append(str(cause))
        cause = cause.__cause__
    return chain


def usage_error(capsys: pytest.CaptureFixture[str], call: Callable[..., Any], *args: Any) -> str:
    """What `call(*args)` printed on stderr as it stopped with argparse's usage error (exit status 2)."""
    with pytest.raises(SystemExit) as exit_info:
        call(*args)
    assert exit_info.value.code == 2
    return capsys.readouterr().err
