"""What the tests share: the Bytewax oracle, flows, the brokers, servers and cluster the tests start, process trees,
helpers of the windowing tests; `conftest.py` only wires them into fixtures."""
