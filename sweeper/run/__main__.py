import sys

from sweeper.run.entry import main

sys.exit(main())
