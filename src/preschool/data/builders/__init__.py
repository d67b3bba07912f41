"""Dataset builders, one per file (file stem = registry name; contract in ``data/builder.py``).

``DATASET_BUILDERS`` imports every module of this package on first use (and the
``generator`` and ``l2t`` builders from ``synthetic/builder.py`` and ``l2t/builder.py``,
which build on ``data``). A new way to build a dataset from a ``data.<name>`` spec is
one new file here; a dataset built from another prepared dataset is a derived kind
(``data/kinds/``).
"""
