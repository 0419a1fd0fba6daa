"""The SQL of the lake's questions and views, shipped in the wheel as raglake.sql (read with importlib.resources)."""
