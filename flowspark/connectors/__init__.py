"""Ready-made sources and sinks, with Bytewax's module and class names.

`files` reads and writes local text files, `stdio` talks to the console and
`demo` makes up data for examples; `kafka` talks to Kafka brokers and `spark`
reads and writes any format of the Spark session (not in Bytewax).
"""
