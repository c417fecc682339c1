"""Imbalance Workbench: losses, Chinese masking and trainers for imbalanced NLP."""

__version__ = "0.1.0"
