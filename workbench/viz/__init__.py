"""Plotly figures and ipywidgets panels over plain library functions: notebooks draw from here, studies never draw."""

from workbench.viz import figures
from workbench.viz.calibration import reliability_diagram
from workbench.viz.confusion import confusion_figure, confusion_grid, matrix_grid
from workbench.viz.curves import dice_paper_figure1, figure_loss_curves, loss_curves, pcl_vs_ls_figure
from workbench.viz.entropy import entropy_figure
from workbench.viz.experiments import (
    aux_sweep_figure,
    checkpoint_rates_figure,
    comparison_figure,
    downstream_figure,
    eval_loss_figure,
    grouped_bars,
    label_count_bars,
    level_rates_figure,
    masking_heatmap,
    metric_lines,
    pretraining_loss_figure,
)
from workbench.viz.figures import set_output_dir, show
from workbench.viz.widgets import EntropyPanel, LinkedCurve, LossCurvePanel, PclWeightsPanel

__all__ = [
    "EntropyPanel",
    "LinkedCurve",
    "LossCurvePanel",
    "PclWeightsPanel",
    "aux_sweep_figure",
    "checkpoint_rates_figure",
    "comparison_figure",
    "confusion_figure",
    "confusion_grid",
    "dice_paper_figure1",
    "downstream_figure",
    "entropy_figure",
    "eval_loss_figure",
    "figure_loss_curves",
    "figures",
    "grouped_bars",
    "label_count_bars",
    "level_rates_figure",
    "loss_curves",
    "masking_heatmap",
    "matrix_grid",
    "metric_lines",
    "pcl_vs_ls_figure",
    "pretraining_loss_figure",
    "reliability_diagram",
    "set_output_dir",
    "show",
]
