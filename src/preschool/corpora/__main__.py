"""``python -m preschool.corpora ...`` = ``preschool corpus ...``."""

import sys

from ..cli import main

sys.exit(main(["corpus", *sys.argv[1:]]))
