"""Thin Prefect flows: resolve config, fan out batches, gather, land. No metric logic here."""
