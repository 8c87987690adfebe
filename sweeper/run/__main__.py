"""`python -m sweeper.run MODULE:FUNCTION RUN_DIR`: one run of an entry point (its code is sweeper.run.entry)."""
import sys

from sweeper.run.entry import main

sys.exit(main())
