"""The workers' write path: one turn through record, extract, anchor and consolidate
(``pipeline``), each step one short idempotent transaction.

Imported by ``workers`` and operator commands, never by the chat side.
"""
