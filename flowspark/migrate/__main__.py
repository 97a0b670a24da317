"""`python -m flowspark.migrate [--diff] PATH...`: see `flowspark.migrate`."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from flowspark.migrate import FileChange, migrate_paths


def _diff(change: FileChange) -> str:
    name = change.path.as_posix().lstrip("/")
    return "".join(
        difflib.unified_diff(
            change.before.splitlines(keepends=True),
            change.after.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )


def _write(change: FileChange) -> None:
    with open(change.path, "w", encoding=change.encoding, newline="") as out:
        out.write(change.after)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m flowspark.migrate`: rewrite (or, with `--diff`, show) the files; findings go to stderr."""
    parser = argparse.ArgumentParser(
        prog="python -m flowspark.migrate",
        description="Rewrite a Bytewax project's imports and run commands to flowspark's; "
        "report what flowspark does not support.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or directories to migrate")
    parser.add_argument("--diff", action="store_true", help="print a unified diff instead of changing the files")
    args = parser.parse_args(argv)
    missing = [p for p in args.paths if not p.exists()]
    if missing:
        parser.error(f"no such file or directory: {missing[0]}")
    changes: List[FileChange] = migrate_paths(args.paths)
    rewritten = 0
    for change in changes:
        if change.changed:
            rewritten += 1
            if args.diff:
                sys.stdout.write(_diff(change))
            else:
                _write(change)
    findings = [f for c in changes for f in c.findings]
    for finding in findings:
        print(finding, file=sys.stderr)
    verb = "would rewrite" if args.diff else "rewrote"
    print(f"flowspark.migrate: {verb} {rewritten} file(s); {len(findings)} finding(s) to check", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
