"""Export formats, one per file (file stem = registry name; contract and shared helpers in ``data/export.py``).

``EXPORTERS`` finds a format by name in the module of that name, and imports every module here when it
lists them, so a new format is one new file (or a plug-in's ``@EXPORTERS.register``).
"""
