"""Pinned Hugging Face hub snapshots (models and data sets) with errors that say what to do.

Downloads are their own step (a login node with internet), never part of a GPU job: every later stage reads the folder
this writes. The snapshot lands in a temporary sibling folder and is renamed into place, so an interrupted download
never leaves a folder a rerun would trust.
"""

from __future__ import annotations

from pathlib import Path

from .errors import UserError
from .io_utils import atomic_dir


def require_pinned(repo_id: str, revision: str | None) -> None:
    """Reject a missing or moving revision: results must name the exact weights or data."""
    if not revision or revision == "main" or len(revision) != 40:
        raise UserError(f"pin a revision (a 40-character commit hash) for {repo_id}, got {revision!r}: "
                        "results must name the exact weights or data")


def snapshot(repo_id: str, revision: str, out_dir, allow_patterns: list[str], repo_type: str = "model",
             token: str | None = None) -> Path:
    """Fetch the files of ``repo_id@revision`` matching ``allow_patterns`` into ``out_dir`` (atomically)."""
    from huggingface_hub import snapshot_download

    require_pinned(repo_id, revision)
    try:
        with atomic_dir(out_dir) as tmp:
            snapshot_download(repo_id, revision=revision, local_dir=tmp, token=token, repo_type=repo_type,
                              allow_patterns=allow_patterns)
    except BaseException as err:
        explained = _explain(err, repo_id, revision, repo_type)
        if explained is err:
            raise
        raise explained from err
    return Path(out_dir)


def _explain(err: BaseException, repo_id: str, revision: str, repo_type: str) -> BaseException:
    """The download error as one that says what to do, a UserError (other errors pass through unchanged)."""
    from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError

    flag = "" if repo_type == "model" else f" --repo-type {repo_type}"
    if isinstance(err, GatedRepoError):
        return UserError(f"{repo_id} is gated: accept its licence on the hub and set HF_TOKEN ({err})")
    if isinstance(err, LocalEntryNotFoundError):
        return UserError(
            f"cannot download {repo_id}@{revision}: offline (HF_HUB_OFFLINE set or no network) and not in the local "
            f"cache; download it on a connected machine (huggingface-cli download {repo_id}{flag} --revision "
            f"{revision}) or point the source to a local folder")
    if isinstance(err, RepositoryNotFoundError):
        return UserError(f"{repo_id} does not exist on the hub or needs a token ({err})")
    return err
