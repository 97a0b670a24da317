"""Spark Connect: the user's warm local server (`connect_server`, `warm_session`) and sessions on a server a run
names (`connect_client`).  Imports `spark`, `sources` and `util`.
"""
