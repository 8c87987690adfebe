"""What a run process observes about itself and records: the environment it saw (envinfo; env references kept as
references: envrefs), the code it ran (provenance), the examples it is evaluated on (evaluation), what it changed
in its working folder (folder_watch), and what a script reports without the run API (reported). Torch-free."""
