"""From a command line to a composed config: the override syntax (argv), Hydra composition (compose), where
configs are searched (search), and Hydra's errors as one line (hydra_errors)."""
