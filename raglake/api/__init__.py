"""The Python API (`raglake.evaluate`, `raglake.open_lake`, `raglake.Result`; README "Python API"):
raglake.api.run evaluates through the `evaluate` flow, raglake.api.lake and raglake.api.result read
the lake as pandas DataFrames. This package module imports nothing, so that reading a lake never
loads Prefect."""
