"""The plan of a sweep: variants x seeds -> runs, written into the sweep dir; recorded plans; the lock."""
