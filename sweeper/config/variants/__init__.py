"""The variants of an experiment against its baseline: what each changes (config_diff), what each changed key is
about (concerns), the one-change rule checked before launch (ablation), every variant's overrides checked against
the base config (variant_overrides), and the resources each variant's runs get (resources)."""
