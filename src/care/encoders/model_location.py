"""Where a model's weights are: a local folder or the Hugging Face Hub (its cache first when the Hub is out of reach).

:func:`locate_model` turns a model string (path or Hub id) into a :class:`ModelLocation`: what to hand to
``SentenceTransformer``, whether the folder is a sentence-transformers one (``modules.json``) or a plain Hugging
Face one (``config.json``), and the weights' identity that the encoder's fingerprint hashes (a local folder's
files, or a Hub id with its resolved commit). A missing model is a :class:`~care.errors.CareError` that says what
to pass instead; a Hub id that is not cached fails within :data:`HUB_PROBE_TIMEOUT_S` when the Hub cannot be
reached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from care.encoders.fingerprint import folder_identity
from care.errors import CareError

#: Seconds to wait for the Hub's host before calling it unreachable: a model id that is not cached then
#: fails in seconds, not after huggingface_hub's ~25 s of retries.
HUB_PROBE_TIMEOUT_S = 3.0
#: Hugging Face Hub ids: ``name`` or ``owner/name`` (letters, digits, ``_ . -``).
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9][A-Za-z0-9_.\-]*)?$")
_MODEL_FILE_EXTENSIONS = (".json", ".yaml", ".yml", ".safetensors", ".bin", ".pt", ".onnx")


@dataclass(frozen=True)
class ModelLocation:
    """Where the weights are and what kind of folder holds them.

    Attributes:
        path: what to pass to ``SentenceTransformer`` / ``Transformer`` (folder or Hub id).
        is_sentence_transformer: the folder has ``modules.json``.
        identity: JSON-serialisable description of the weights, hashed into the fingerprint.
    """

    path: str
    is_sentence_transformer: bool
    identity: dict[str, Any]


def looks_like_path(model: str) -> bool:
    """True when ``model`` cannot be a Hub id (absolute / relative / home path, or a file name)."""
    if model.startswith(("/", ".", "~")) or "\\" in model:
        return True
    if model.lower().endswith(_MODEL_FILE_EXTENSIONS):
        return True
    return _HUB_ID.match(model) is None


def _missing_model_error(model: str, reason: str) -> CareError:
    return CareError(
        f"model '{model}' {reason}. Pass the path of a local folder that holds the model — a "
        "sentence-transformers folder (modules.json) or a Hugging Face folder (config.json plus "
        "tokenizer files), e.g. /models/bge-base-zh-v1.5 — or a Hugging Face Hub id such as "
        "BAAI/bge-base-zh-v1.5 on a machine that can reach the Hub or has it in its cache."
    )


def _local_location(model: str) -> ModelLocation:
    folder = Path(model).expanduser()
    if not folder.is_dir():
        raise _missing_model_error(model, "is a file, not a model folder")
    if (folder / "modules.json").is_file():
        return ModelLocation(str(folder), True, folder_identity(folder))
    if (folder / "config.json").is_file():
        return ModelLocation(str(folder), False, folder_identity(folder))
    raise _missing_model_error(model, "is a folder without modules.json or config.json")


def hub_reachable(timeout_s: float = HUB_PROBE_TIMEOUT_S) -> bool:
    """Whether the Hugging Face Hub's host accepts a TCP connection within ``timeout_s`` (False when
    ``HF_HUB_OFFLINE`` is set). Behind a proxy the direct probe proves nothing, so it answers True."""
    import socket
    import urllib.request
    from urllib.parse import urlparse

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    if urllib.request.getproxies():
        return True
    endpoint = urlparse(constants.ENDPOINT)
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((endpoint.hostname or "", port), timeout=timeout_s).close()
    except OSError:
        return False
    return True


def _hub_location(model: str, revision: str | None) -> ModelLocation:
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import RemoteEntryNotFoundError

    found: dict[str, str] = {}
    offline = not hub_reachable()
    if offline:  # only the local cache can help: look there instead of retrying the network for ~25 s
        for filename in ("modules.json", "config.json"):
            try:
                found[filename] = hf_hub_download(model, filename, revision=revision, local_files_only=True)
                break
            except Exception:  # noqa: BLE001 - not cached: try the next file
                continue
        if not found:
            raise _missing_model_error(
                model, f"does not exist as a local folder, is not in the local Hugging Face cache, and could not be "
                f"fetched from the Hugging Face Hub: {constants.ENDPOINT} cannot be reached from this machine (offline?)")
    for filename in () if offline else ("modules.json", "config.json"):
        try:
            found[filename] = hf_hub_download(model, filename, revision=revision)
            break
        except RemoteEntryNotFoundError:
            continue
        except Exception as exc:  # offline, unknown repo, gated repo, connection error
            raise _missing_model_error(
                model, f"does not exist as a local folder and could not be fetched from the Hugging Face Hub ({type(exc).__name__})"
            ) from exc
    if not found:
        raise _missing_model_error(model, "is a Hub repository without modules.json or config.json")
    filename, local_file = next(iter(found.items()))
    # Cached files live in .../snapshots/<commit>/<file>: the commit pins the exact weights.
    commit = Path(local_file).parent.name
    return ModelLocation(model, filename == "modules.json", {"hub_id": model, "revision": revision, "commit": commit})


def locate_model(model: str, revision: str | None = None) -> ModelLocation:
    """Find a model: an existing local folder first, then (for a plausible id) the Hugging Face Hub.

    Raises:
        CareError: the path does not exist (and is not a Hub id, or the Hub cannot be reached),
            or the folder holds neither ``modules.json`` nor ``config.json``.
    """
    if Path(model).expanduser().exists():
        return _local_location(model)
    if looks_like_path(model):
        raise _missing_model_error(model, "does not exist")
    return _hub_location(model, revision)
