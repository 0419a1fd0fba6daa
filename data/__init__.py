"""The bundled sample (golden set, captures, corpus, targets, gate rules), shipped in the wheel as raglake.sample."""
