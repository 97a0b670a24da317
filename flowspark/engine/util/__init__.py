"""The engine's ground floor: what several of its folders share, importing none of them.

`shutdown` (stopping a run on SIGTERM), `private_files` (files only the
user may read), `cyclic_gc` (bulk work with the cyclic collector paused)
and `client_environment` (the working directory and environment a run
lends its tasks on the warm server).  Imports nothing of the engine.
"""
