"""Thin Prefect flows: resolve config, fan out batches, gather, land. No metric logic here.

Importing this package applies raglake's Prefect settings (raglake.prefect_settings), so the Python
entry point (`evaluate(...)`, `rescore(...)`) runs with the same ones as the command line: the flow
modules import Prefect only after this has run."""

from raglake import prefect_settings

prefect_settings.apply()
