"""Hydra launcher plugin `sweeper_pool`: plain Hydra multirun on sweeper's pinned local GPU/CPU pool.

    python my_app.py -m seed=0,1,2,3 hydra/launcher=sweeper_pool
    python my_app.py -m seed=0-7 hydra/launcher=sweeper_pool hydra.launcher.devices=[0,1] \
        hydra.launcher.runs_per_device=2
    python my_app.py -m seed=0,1,2 lr=0.01,0.1 hydra/launcher=sweeper_pool 'hydra.launcher.baseline="lr=0.01"'
    python -m sweeper.report <hydra.sweep.dir>          # the decision table: variants = overrides without the seed

Each job runs in a fresh child process with CUDA_VISIBLE_DEVICES, OMP/MKL thread counts and CPU affinity set
before it starts; the next job starts the moment a slot frees. Each job's output dir is a sweeper run dir and
the sweep dir holds the manifest (options: sweeper_pool_launcher.py). This package is imported by Hydra's plugin
scan, so it imports nothing heavy: sweeper, cloudpickle and the pool load only when a multirun launches.
"""
