"""Experiment grids behind the notebooks: plain functions returning pandas tables."""
