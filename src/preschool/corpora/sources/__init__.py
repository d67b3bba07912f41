"""Text sources: plain-text files, JSONL, Parquet, Hugging Face datasets and the built-in storybook.

Each source is a small class registered in ``SOURCES`` under the name used in
``CorpusConfig.source``, in a module of this package named after it (``text.py``,
``jsonl.py``, ``parquet.py``, ``auto.py``, ``hf.py``, ``storybook.py``; ``datatrove.py``
holds the ``datatrove_*`` readers); a new source is a new file here (or in a plug-in),
found by the registry, nothing else to edit. ``source.py`` holds what they share
(:class:`Source`, :class:`FileSource`, the folder walk), re-exported here. A source yields raw :class:`Document` s and
:func:`iter_documents` applies what every source shares: chunking
(``split_documents``) and the ``max_chars`` cut, empty / ``min_chars`` drops,
and the ``max_documents`` / ``target_tokens`` limits.

Files: ``auto`` (the default) picks the reader per file -- ``text`` for
``.txt .text .md``, ``jsonl`` for ``.jsonl .json .ndjson`` (each optionally
``.gz``), ``parquet`` for ``.parquet`` or a file starting with Parquet's magic
bytes -- so one folder may mix formats and every file in it is read or
counted. A folder is walked following symbolic links to files and folders
(a link that loops back to a folder above it is not followed again), hidden
files and folders (name starting with ``.``) are skipped, and files are read
in sorted order of their path relative to ``path``, so ids and order are the
same on every machine. A file reached twice (a link to a file or folder that
is also read directly) is read once, under its first relative path, and the
other paths are counted as ``duplicate_file``; dangling links are counted as
``broken_link``. Under the default ``glob`` a file no reader of the source
knows is counted as ``unsupported_file``; a file named directly as ``path``
(or matched by an explicit ``glob``) is read as text when its extension says
nothing.

Lines are read in pieces of at most 1 MiB, so a file without newlines never
sits in memory whole: text lines longer than ``max_chars`` are cut at a
sentence end or a space; a JSON line longer than ``16 x max_chars`` bytes is a
bad record (``too_long``). UTF-16 input (byte-order mark, or NUL bytes at every
other position) is reported as such, never decoded as UTF-8.

Ids: ``text`` -> ``<relative file>`` (``#<chunk>`` when split or cut);
``jsonl`` -> ``<relative file>:<line>``; ``parquet`` -> ``<relative file>:<row>``;
``hf`` -> ``<name>[/<config>]/<split>:<row>``; ``storybook`` -> ``storybook:<index>``.
With ``id_field`` set, jsonl/parquet/hf use that field's value instead.

Positions: every document of a file source carries where it starts
(``meta["position"]``, see :func:`iter_documents`), so an interrupted read -- a
resumed ``prepare``, a datatrove task -- continues at a file without reading the
files before it: inside a JSON Lines file at the record's byte offset, inside a
Parquet file at the row group holding the row, inside a text file at the line
where the document's piece (or the latest piece before it that a fresh read can
produce again) starts. A ``.gz`` file cannot seek and is decompressed up to there.
"""

from ..base import SOURCES  # noqa: F401  (the registry the sources register in)
from .source import (LONE_SURROGATE, RECORD_CHARS_FACTOR, FileSource, Source, iter_documents,  # noqa: F401
                     local_files, walk_files)
