"""The `log` check: a training log's end read for freshness, patterns, errors, loss and progress;
finding and reading the files (log_files.py) and the signals read from them (log_signals.py)."""
