"""Calls to the Hugging Face Hub within bounded time: a hub name (``model.model_name_or_path``) is looked up once, its
failure one ValueError naming the key and the endpoint, the look-up bounded by its own timeout. A run that pushes to
the hub (``training.push_to_hub``) bounds the Trainer's hub calls, which take no timeout of their own, with a request
hook on huggingface_hub's shared session (huggingface_hub's own default for its API calls is none: a hub that never
answers hung a run for good); no other run touches that session.

``WORKBENCH_HUB_TIMEOUT`` (seconds, default :data:`DEFAULT_TIMEOUT_S`) bounds each connect, read and write;
``HF_ENDPOINT`` names the hub, ``HF_HUB_OFFLINE=1`` uses the local cache only (no look-up).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

DEFAULT_TIMEOUT_S = 30.0
TIMEOUT_VARIABLE = "WORKBENCH_HUB_TIMEOUT"


def hub_timeout() -> float:
    """Seconds each hub request may wait: ``WORKBENCH_HUB_TIMEOUT`` when it is a number > 0, else the default."""
    try:
        seconds = float(os.environ.get(TIMEOUT_VARIABLE, DEFAULT_TIMEOUT_S))
    except ValueError:
        raise ValueError(
            f"{TIMEOUT_VARIABLE}: must be a number of seconds > 0, got {os.environ[TIMEOUT_VARIABLE]!r}"
        ) from None
    if not 0 < seconds < float("inf"):
        raise ValueError(f"{TIMEOUT_VARIABLE}: must be a number of seconds > 0, got {seconds!r}")
    return seconds


def _bounded(request: Any) -> None:
    """An httpx request hook: each timeout a call left unbounded (None) becomes :func:`hub_timeout`."""
    limits = request.extensions.get("timeout") or {}
    bound = hub_timeout()
    request.extensions["timeout"] = {
        phase: bound if limits.get(phase) is None else limits[phase] for phase in ("connect", "read", "write", "pool")
    }


def bound_hub_timeouts() -> None:
    """Give huggingface_hub's shared session (``huggingface_hub.get_session()``) the request hook :func:`_bounded`:
    only for the Trainer's own hub calls (``training.push_to_hub``), which take no timeout of their own (a model's
    look-up passes its timeout to the call)."""
    from huggingface_hub import get_session

    hooks = get_session().event_hooks
    if _bounded not in hooks["request"]:
        hooks["request"] = [*hooks["request"], _bounded]


def is_offline() -> bool:
    """``HF_HUB_OFFLINE`` set: the hub is not asked, models come from the local cache."""
    from huggingface_hub import constants

    return bool(constants.is_offline_mode())


def check_hub_model(name: str, key: str) -> None:
    """``name`` is a local path, or a model the hub answers for within :func:`hub_timeout` (asked once per name and
    endpoint; offline mode asks nothing); else ValueError naming ``key``, the endpoint and what went wrong."""
    if os.path.exists(name) or is_offline():
        return
    from huggingface_hub import constants

    _look_up(str(name), key, constants.ENDPOINT)


@lru_cache(maxsize=64)
def _look_up(name: str, key: str, endpoint: str) -> None:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, HFValidationError, RepositoryNotFoundError

    seconds = hub_timeout()
    try:  # the call's own timeout: huggingface_hub's shared session is left as it is
        HfApi(endpoint=endpoint).model_info(name, timeout=seconds)
    except HFValidationError:
        raise ValueError(
            f"{key}: {name!r} is neither a local folder nor a hub model name (organisation/name)"
        ) from None
    except GatedRepoError:
        raise ValueError(
            f"{key}: {name!r} on the hub at {endpoint} is gated: accept its terms and set HF_TOKEN"
        ) from None
    except RepositoryNotFoundError:
        raise ValueError(
            f"{key}: {name!r} is no local folder, and the hub at {endpoint} has no such model (or it is private: "
            "set HF_TOKEN)"
        ) from None
    except Exception as error:  # a timeout, no network, a server error
        detail = " ".join(str(error).split())[:160] or type(error).__name__
        status = getattr(getattr(error, "response", None), "status_code", None)
        what = f"did not answer within {seconds:g} s" if "Timeout" in type(error).__name__ else "could not be reached"
        what = f"answered {status}" if isinstance(error, HfHubHTTPError) else what
        raise ValueError(
            f"{key}: {name!r} is no local folder, and the hub at {endpoint} {what} ({type(error).__name__}: "
            f"{detail}); set HF_HUB_OFFLINE=1 to load it from the local cache"
        ) from None


def is_hub_error(error: BaseException) -> bool:
    """Whether ``error`` (or its cause) comes from a call to the hub: huggingface_hub's errors, an HTTP timeout."""
    return any(
        type(item).__module__.split(".")[0] in ("huggingface_hub", "httpx", "httpx2", "httpcore", "httpcore2")
        for item in (error, error.__cause__, error.__context__)
        if item is not None
    )


def hub_error_text(error: BaseException) -> str:
    """One line saying which hub failed and how: it did not answer in time, or what it answered."""
    from huggingface_hub import constants

    detail = " ".join(str(error).split())[:200] or type(error).__name__
    timed_out = any("Timeout" in type(item).__name__ for item in (error, error.__cause__, error.__context__))
    what = f"did not answer within {hub_timeout():g} s" if timed_out else "failed"
    return f"the hub at {constants.ENDPOINT} {what} ({type(error).__name__}: {detail})"
