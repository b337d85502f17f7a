"""``--push REPO``: the folder uploaded to the Hugging Face Hub with ``huggingface_hub``.

The plan (:func:`push_plan`, pure) follows the manifest: the folder's root without
``revisions/`` is uploaded to ``main``; then each revision ``step_N`` becomes a branch
created from ``main`` (``HfApi.create_branch``; kept when it exists), and its files are
uploaded onto it: the root's for the main checkpoint's own step; for another, its folder
(``main``'s weight files deleted in the same commit, :data:`WEIGHT_PATTERNS`) and then the
card and manifest, so a branch left by an earlier push is brought up to date too (an
upload that changes nothing makes no commit). The token is checked before anything is
written or uploaded (:func:`require_token`).
``huggingface_hub`` is imported here only, on use.

Tested: the token check, the repository id check and the plan. Not tested (no network
here): the upload itself (``create_repo``, ``upload_folder``, ``create_branch``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.errors import UserError
from ccpo_lab.publish.folder import MANIFEST, REVISIONS

CARD = "README.md"
"""The card's file name."""

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json")
"""``main``'s weight files a revision's upload removes from its branch (a revision whose
weights are sharded differently leaves none of ``main``'s behind)."""


@dataclass(frozen=True)
class Step:
    """One operation of a push."""

    op: str
    """``create_repo``, ``create_branch``, ``upload_folder`` (a folder's files) or
    ``upload_card`` (the root's card and manifest alone)."""
    revision: str
    """The branch it acts on (``main`` for the repository and its root)."""
    folder: str | None = None
    """The folder uploaded (relative to the published folder), for ``upload_folder``."""


def push_plan(manifest: dict[str, Any]) -> tuple[Step, ...]:
    """The operations that publish a folder with ``manifest``, in order."""
    steps = [Step("create_repo", "main"), Step("upload_folder", "main", ".")]
    for r in manifest["revisions"]:
        steps.append(Step("create_branch", r["name"]))
        if r["folder"] == ".":
            steps.append(Step("upload_folder", r["name"], "."))
        else:
            steps += [Step("upload_folder", r["name"], r["folder"]),
                      Step("upload_card", r["name"], ".")]
    return tuple(steps)


def check_repo_id(repo: str) -> None:
    """UserError for a repository id the Hub refuses (``huggingface_hub``'s own check), or
    when ``huggingface_hub`` is not installed."""
    try:
        from huggingface_hub.errors import HFValidationError
        from huggingface_hub.utils import validate_repo_id
    except ImportError:
        raise UserError("pushing needs huggingface_hub (pip install 'ccpo-lab[hub]')",
                        key="--push", value=repo) from None

    try:
        validate_repo_id(repo)
    except HFValidationError as e:
        raise UserError(f"not a Hugging Face repository id: {str(e).splitlines()[0]}",
                        key="--push", value=repo) from None
    if "/" not in repo:
        raise UserError("expected a repository id with its namespace (user-or-org/name)",
                        key="--push", value=repo)


def require_token() -> str:
    """The Hugging Face token (``HF_TOKEN``, else the one ``hf auth login`` stored under
    ``HF_HOME``); UserError when there is none."""
    from huggingface_hub import get_token

    token = get_token()
    if not token:
        raise UserError("no Hugging Face token: set HF_TOKEN or run `hf auth login`; nothing "
                        "was written or uploaded", key="--push")
    return token


def push(folder: Path, repo: str, manifest: dict[str, Any], token: str,
         say: Callable[[str], None] = print) -> str:
    """Upload ``folder`` to ``repo`` by :func:`push_plan`; the repository's URL.

    Raises:
        UserError: the Hub refused or could not be reached (the folder stays complete:
            run the push again).
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(token=token)
    try:
        for step in push_plan(manifest):
            say(f"{step.op} {repo}@{step.revision}{' ' + step.folder if step.folder else ''}")
            _run(api, step, folder, repo)
    except (HfHubHTTPError, OSError) as e:
        raise UserError(f"push to {repo} failed: {str(e).splitlines()[0] if str(e) else e!r}"
                        f"; the folder is complete, push it again", file=folder,
                        key="--push", value=repo) from None
    return f"https://huggingface.co/{repo}"


def _run(api: Any, step: Step, folder: Path, repo: str) -> None:
    if step.op == "create_repo":
        api.create_repo(repo, repo_type="model", exist_ok=True)
    elif step.op == "create_branch":
        api.create_branch(repo, branch=step.revision, revision="main", exist_ok=True)
    elif step.op == "upload_card":
        api.upload_folder(repo_id=repo, folder_path=str(folder), revision=step.revision,
                          allow_patterns=[CARD, MANIFEST],
                          commit_message="ccpo-lab card: card and manifest")
    elif step.folder == ".":
        api.upload_folder(repo_id=repo, folder_path=str(folder), revision=step.revision,
                          ignore_patterns=[f"{REVISIONS}/**"],
                          commit_message="ccpo-lab card: card, manifest, main weights")
    else:
        api.upload_folder(repo_id=repo, folder_path=str(folder / str(step.folder)),
                          revision=step.revision, delete_patterns=list(WEIGHT_PATTERNS),
                          commit_message=f"ccpo-lab card: weights of {step.revision}")
