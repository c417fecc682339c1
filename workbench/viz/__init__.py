"""Plots and widgets: plotly figures and ipywidgets panels over plain library functions."""
