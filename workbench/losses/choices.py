"""The options of the MLM objectives, defined once, beside the losses that take them: the losses check their
arguments against these tuples, and the config's ``objective`` section checks its keys against the same ones.

No torch here: reading a config (``python -m workbench.train --help``, the runner) imports this module and not
the loss modules (``workbench.losses`` imports them on first use); it imports ``workbench.checks`` alone.
"""

from __future__ import annotations

from workbench.checks import Bounds

SR_LEVELS = ("token", "sentence")
"""Soft regularization: token level (eq. 3) or sentence level (Sec. 5)."""

SR_PREDICTIONS = ("argmax", "expected")
"""Soft regularization's predicted embedding: the argmax token's (the paper's) or the expected one."""

HC_LEVELS = ("token", "word")
"""Hard correction: single-token words (the paper's footnote 5) or whole masked words (the workbench's extension)."""

KL_DIRECTIONS = ("filled||original", "original||filled")
"""Sentence-level soft regularization: KL(filled || original) (the paper's) or the reverse."""

SR_WEIGHT = Bounds(ge=0, le=1e12)
"""Soft regularization's weight (loss = MLM CE + weight x SR): in [0, 1e12]; 0 is plain MLM."""
