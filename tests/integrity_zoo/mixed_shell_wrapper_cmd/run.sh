#!/bin/bash
# the experiment's entry point: forwards every flag to the solver
exec python solver.py "$@"
