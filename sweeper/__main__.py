import signal
import sys

signal.signal(signal.SIGTERM, signal.default_int_handler)   # SIGTERM during the imports: KeyboardInterrupt too
try:
    from sweeper.cli import main
except KeyboardInterrupt:
    print("sweeper: interrupted; nothing was started; run the same command again", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
