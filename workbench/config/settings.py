"""A notebook's ``extra_settings``: loss settings of yours added to the notebook's own (docs/your_own_loss.md).

``extra_settings: {label: {loss: name, params: {...}, claim: {paper, where, quote}}}``: ``loss`` a registered name
(the workbench's own, or one a file of ``loss_modules`` registers), ``params`` its keyword arguments (default none),
``claim`` optional: the sentence of a paper the results page tests the setting against (default: the setting is
compared with the notebook's baselines and the paper's method, without a paper's claim). Checked here for its shape,
without torch; whether the loss is registered and takes the parameters is checked against the registry
(``workbench.losses.check_loss_parameters``) where the modules are imported: the runner before any kernel starts, the
notebook before any training.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workbench.checks import check_text
from workbench.config.objectives import LossSpec

EXTRA_KEYS = ("loss", "params", "claim")
CLAIM_KEYS = ("paper", "where", "quote")


def _entries(extra_settings: Any, parameter: str) -> dict[str, Mapping[str, Any]]:
    """The entries of ``extra_settings`` (None: none), each a mapping of :data:`EXTRA_KEYS` with a ``loss``."""
    if extra_settings is None:
        return {}
    if not isinstance(extra_settings, Mapping):
        raise ValueError(
            f"{parameter}: must be a mapping of label -> {{loss: name, params: {{...}}}}, got {extra_settings!r}"
        )
    entries = {}
    for label, entry in extra_settings.items():
        check_text(f"{parameter} label", label)
        where = f"{parameter}[{label!r}]"
        if not isinstance(entry, Mapping) or "loss" not in entry:
            raise ValueError(f"{where}: must be a mapping {{loss: name, params: {{...}}}}, got {entry!r}")
        unknown = sorted(set(entry) - set(EXTRA_KEYS))
        if unknown:
            raise ValueError(f"{where}: keys must be among {list(EXTRA_KEYS)}, got {unknown}")
        check_text(f"{where}.loss", entry["loss"])
        if not isinstance(entry.get("params") or {}, Mapping):
            raise ValueError(f"{where}.params: must be a mapping of the loss's parameters, got {entry['params']!r}")
        claim = entry.get("claim")
        if claim is not None and (not isinstance(claim, Mapping) or sorted(claim) != sorted(CLAIM_KEYS)):
            raise ValueError(f"{where}.claim: must be a mapping with the keys {list(CLAIM_KEYS)}, got {claim!r}")
        for key in CLAIM_KEYS if claim is not None else ():
            check_text(f"{where}.claim.{key}", claim[key])
        entries[label] = entry
    return entries


def extra_specs(extra_settings: Any, parameter: str = "extra_settings") -> dict[str, LossSpec]:
    """Label -> :class:`LossSpec` of each extra setting, as written (no notebook parameter is added to it)."""
    return {
        label: LossSpec(entry["loss"], dict(entry.get("params") or {}))
        for label, entry in _entries(extra_settings, parameter).items()
    }


def extra_claims(extra_settings: Any, parameter: str = "extra_settings") -> dict[str, dict[str, str] | None]:
    """Label -> the claim ``{paper, where, quote}`` an extra setting gives, or None."""
    return {label: entry.get("claim") for label, entry in _entries(extra_settings, parameter).items()}
