"""The run store: a run is trained once, and every later sweep that needs it reuses it (issue 47).

    reuse = find_reuse(plan, folders)     # sweeper.store.lookup: at plan time, each planned run's earlier twin
    print(format_reuse(reuse))            # what a dry run shows: reused from where, or the first input that differs
    link_reused(plan, reuse)              # sweeper.store.link: under the sweep lock, the twins' files copied in
    python -m sweeper.gc [FOLDER]         # sweeper.store.gc: runs no sweep refers to, and the disk reuse uses

A run's identity (sweeper.store.identity) is everything that decides its result; the store is the sweeps already
on disk (the folder the command writes its sweep into, and folders named in sweeper.reuse_from), read through
their manifests and each run's own records; what a sweep reused is SWEEP_DIR/reused.json (sweeper.store.record).
"""
