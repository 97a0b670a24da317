"""Spark Connect: the user's warm local server (`connect_server`, `warm_session`) and sessions on a server a run
names (`connect_client`), with the environment a run lends its tasks there (`client_environment`).  Imports `spark`,
`recovery` and `sources`.
"""
