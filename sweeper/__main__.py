"""python -m sweeper +experiment=NAME seeds=0-3: plan, launch and report a seed sweep (sweeper.cli.sweep.main)."""
import signal
import sys

from sweeper import interrupts

signal.signal(signal.SIGTERM, signal.default_int_handler)   # SIGTERM during the imports: KeyboardInterrupt too
try:
    from sweeper.cli.sweep import main
except KeyboardInterrupt:
    print("sweeper: interrupted; nothing was started; run the same command again", file=sys.stderr)
    interrupts.exit_with(interrupts.INTERRUPTED)

try:
    code = main()
except KeyboardInterrupt:            # Ctrl-C in the instant between main's own handling and the exit
    code = interrupts.INTERRUPTED
interrupts.exit_with(code)
