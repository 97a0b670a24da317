"""What the tests share beyond `conftest.py`: the Bytewax oracle, flows and servers the tests start, helpers of the
windowing tests."""
