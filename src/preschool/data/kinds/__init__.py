"""Derived dataset kinds, one per file (file stem = registry name; contract in ``data/derived.py``).

``DATASET_KINDS`` imports every module of this package on first use, so a new
kind is one new file here. A folder of its own, not all of ``data/``: looking a
kind up must not import the data engine's heavier modules.
"""
