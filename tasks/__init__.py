"""Thin Prefect tasks: a batch in, a batch out, cached by content keys, retried only at IO edges."""
