"""Digests that prove two arms asked the same prompts and paired the same rows.

Both digests are SHA-256 over canonical JSON of a list in ``example_id``
order (not file order), so they depend only on *what* was evaluated and not on
how a split or a generations file happened to be laid out. Scoring writes
them and the report reader recomputes them from the per-example rows, so a
digest in a report can never silently drift from the rows beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sommelier_mlflow._json import canonical_json, sha256_text

__all__ = ["prompt_set_digest", "pair_set_digest"]


def prompt_set_digest(prompt_digests: Sequence[str]) -> str:
    """Digest of one slice's prompts.

    Args:
        prompt_digests: Each example's ``prompt_sha256``, ordered by
            ``example_id``. Ids are deliberately not part of it: the digest
            answers "were the same prompts asked", and the comparison gate
            checks the id sets separately.

    Returns:
        ``sha256(canonical_json([prompt_sha256, ...]))`` as lowercase hex.
    """
    return sha256_text(canonical_json(list(prompt_digests)))


def pair_set_digest(pairs: Iterable[tuple[str, str, str, str]]) -> str:
    """Digest of one language's matched pairs.

    Args:
        pairs: ``(root_id, target_id, root_prompt_sha256, target_prompt_sha256)``
            per pair, ordered by target ``example_id``. Ids are included here
            because the pairing itself (which root each translation joins) is
            what the digest certifies.

    Returns:
        ``sha256(canonical_json([[root_id, target_id, root_prompt, target_prompt], ...]))``.
    """
    return sha256_text(canonical_json([list(pair) for pair in pairs]))
