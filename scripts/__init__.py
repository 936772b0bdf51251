"""Operator entry points: the ``mnemo`` CLI and the operations scripts."""
