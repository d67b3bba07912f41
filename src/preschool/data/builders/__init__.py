"""Dataset builders, one per file (file stem = registry name; contract in ``data/builder.py``).

``DATASET_BUILDERS`` finds its parts in this package (and the ``generator`` and
``l2t`` builders in ``synthetic/builder.py`` and ``l2t/builder.py``, which build on
``data``). A new way to build a dataset from a ``data.<name>`` spec is one new file
here; so is a new kind of dataset built from another prepared dataset (a
``DatasetKind``, run by the ``derived`` builder: ``derived.py``).
"""
