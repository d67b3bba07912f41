"""Compartment presentations, one per file (file stem = registry name; contract in ``compartments/presentation.py``)."""
