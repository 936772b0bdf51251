"""Belief extraction: the extractor plug point (``api``) and the heuristic extractor
(``heuristic`` with its ``rules``, ``text``, ``lexicon`` and ``dates``).

Runs in workers only: the write path imports it; the chat side never does. It imports the
memory model and the shared base.
"""
