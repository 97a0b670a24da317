"""The recovery tests: snapshots, resumes, and the checks of a recovery directory."""
