"""raglake: evaluate RAG systems on a schedule and keep every result in a Parquet lake."""

__version__ = "0.1.0"
