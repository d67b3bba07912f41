"""Dataset builders, one per file (file stem = registry name; contract in ``data/builder.py``).

``DATASET_BUILDERS`` imports every module of this package on first use. A new
way to build a dataset from a ``data.<name>`` spec is one new file here; a
dataset built from another prepared dataset is a derived kind (``data/kinds/``).
"""
