"""Who scored a call: the evaluator's identity, carried by every annotation a watch writes.

An identity is the scorer's name, tlmscore's version and a hash of the settings that change a
score: the scorer's options (less those that only decide what it spends or where it caches: its
`ScorerSpec.spending`), the settings that change rows (the run manifest's), and the threshold
that turns a score into a label. Two watches with the same identity write the same annotations;
a span is scored once per identity.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tlmscore.output import build_manifest
from tlmscore.scoring.base import spec_of
from tlmscore.settings import Settings

HASH_CHARS = 12


@dataclass(frozen=True)
class Evaluator:
    """A scorer, the tlmscore version that ran it, and the hash of the settings that change its scores."""

    scorer: str
    version: str
    settings: str

    @property
    def id(self) -> str:
        """One text for the identity: `tlmscore.grounding@0.1.0#3f2a…` (Phoenix's annotation identifier)."""
        return f"tlmscore.{self.scorer}@{self.version}#{self.settings}"

    @property
    def name(self) -> str:
        """The annotation's name (`tlmscore.grounding`): the same for every identity of one scorer."""
        return f"tlmscore.{self.scorer}"

    def fields(self) -> dict[str, str]:
        """What each annotation carries (`Annotation.evaluator`)."""
        return {"id": self.id, "scorer": self.scorer, "version": self.version, "settings": self.settings}


def settings_hash(scorer: str, options: Mapping[str, Any], settings: Settings, threshold: float) -> str:
    """The hash of what changes a score: the scorer's recorded options, the row settings, the threshold."""
    recorded = spec_of(scorer).recorded(options)
    manifest = build_manifest("watch", [], settings, scorer=scorer, scorer_options=recorded)
    kept = {"options": manifest["scorer_options"], "settings": manifest["settings"], "threshold": threshold}
    text = json.dumps(kept, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_CHARS]


def evaluator_of(scorer: str, options: Mapping[str, Any], settings: Settings, threshold: float = 0.5) -> Evaluator:
    """The identity of a watch scoring with `scorer` (its `options`) under `settings`."""
    from tlmscore import __version__  # noqa: PLC0415  (the package's own version, read once)

    return Evaluator(scorer, __version__, settings_hash(scorer, options, settings, threshold))
