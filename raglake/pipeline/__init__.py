"""The Prefect-free glue of a run: settings, plan, capture, embed, judge stage, score, land, rescore."""
