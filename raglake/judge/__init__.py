"""The LLM judge: the gateway (one object owns every call), versioned prompts, step runners, the ledger."""
