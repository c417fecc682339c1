"""Study: the PCL ablation (notebook 02), label smoothing against every form of the Propensity-Corrected Loss.

"Towards No.1 in CLUE Semantic Matching Challenge: Pre-trained Language Model Erlangshen with Propensity-Corrected
Loss" (arXiv 2208.02959). Modules: :mod:`.ablation` (the settings, the grid of encoders x losses x seeds, its tables)
and :mod:`.claims` (the rows of the results page); every public name is importable from here
(``from workbench.studies import pcl``; ``pcl.run_ablation``, ``pcl.claim_rows``).
"""

from workbench.studies.pcl.ablation import (
    BASELINE,
    BASELINES,
    GRADIENT_FREE,
    METRICS,
    PCL_SETTINGS,
    TABLE4_METRICS,
    Ablation,
    EncoderAblation,
    ablation_table,
    baseline_specs,
    best_gradient_bearing,
    encoder_fitters,
    encoder_key,
    gradient_comparison,
    headline_metrics,
    run_ablation,
    run_encoder_ablation,
    setting_specs,
    table4,
    this_run,
)
from workbench.studies.pcl.claims import (
    CLAIM_METRICS,
    IDENTITY_REASON,
    PAPER_SCALE,
    PURPOSE_CLAIM,
    TABLE4_BASIS,
    TABLE4_CLAIM,
    TABLE4_DIFFERENCES,
    TUNED,
    calibration_table,
    claim_rows,
    sizes,
    tuned_setting,
)

__all__ = [
    "BASELINE",
    "BASELINES",
    "CLAIM_METRICS",
    "GRADIENT_FREE",
    "IDENTITY_REASON",
    "METRICS",
    "PAPER_SCALE",
    "PCL_SETTINGS",
    "PURPOSE_CLAIM",
    "TABLE4_BASIS",
    "TABLE4_CLAIM",
    "TABLE4_DIFFERENCES",
    "TABLE4_METRICS",
    "TUNED",
    "Ablation",
    "EncoderAblation",
    "ablation_table",
    "baseline_specs",
    "best_gradient_bearing",
    "calibration_table",
    "claim_rows",
    "encoder_fitters",
    "encoder_key",
    "gradient_comparison",
    "headline_metrics",
    "run_ablation",
    "run_encoder_ablation",
    "setting_specs",
    "sizes",
    "table4",
    "this_run",
    "tuned_setting",
]
