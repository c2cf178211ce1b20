"""``munet.utils``: activation checkpointing (``checkpoint``) and data loading (``data``)."""
