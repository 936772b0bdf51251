"""The memory model: tenants, turns, episodes, entities and beliefs, and the rules that keep
them (supersession, trust order, hygiene, ego anchors, merges, verified deletion).

Imported by the write path, recall, extraction, maintenance and mirrors; it imports only the
shared base (settings, clock, errors, validate, vectors, db), never ``write``, ``chat``,
``recall`` or ``mirrors``.
"""
