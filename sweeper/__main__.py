import sys

from sweeper.cli import main

sys.exit(main())
