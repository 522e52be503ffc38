"""``python -m ember.prims``: the coverage report (same as ``python -m ember.prims.coverage``)."""
import sys

from .coverage import main

sys.exit(main(sys.argv[1:]))
