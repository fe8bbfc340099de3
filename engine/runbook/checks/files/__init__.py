"""Checks of what lies on disk: any file (`file`), a checkpoint's contents and whether it fits a
model (`checkpoint`), training data shards (`dataset`). The torch and pyarrow halves of the last
two run in a child of the node's Python (`_checkpoint_worker.py`, `_dataset_worker.py`)."""
