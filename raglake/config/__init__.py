"""The front door: an evaluation described by an eval file and the overrides of the command line or the API,
resolved into the runs' settings by one function."""
