"""The report of a sweep: terminal table, report.md, report.html, plots, the live view, the journal."""
