"""The sweep folder and everything read into it: specs, the folder's files, Parquet shards, checksums, the
search journal, the lock, and datasets from sweeps and Kernel Tuner caches. Every layer that reads or writes a
sweep folder depends on this one; it depends on nothing of ``pipeline`` above the top-level modules."""
