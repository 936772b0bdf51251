"""The schedules' job bodies: sleep, backup / restore / drill, reconsolidation, commitment
expiry, session purge and the retention sweep, the daily digest, the firing-ledger report.

Each body is a plain function over a ``JobEnv`` (settings, both databases, the vector index
and the firing's clock) that returns a ``JobReport``; the workers' maintenance actors call
them, the CLI calls some directly. Imports the memory model, mirrors and the shared base;
never ``workers``, ``schedules`` or ``scripts``, and the chat side never imports it.
"""
