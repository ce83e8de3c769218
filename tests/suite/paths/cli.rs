//! `timewarp align` and `--plot` end to end.
