"""The pipeline ``serve`` runs: a spaCy pipeline folder as it is, or a blank one with the ``elmo``
component holding any biLM ``load_bilm`` takes; for both, the size of the component's cache of layers
per segment (``frozen_cache_mb``). And what the server learns from it before it serves
(``warm_up``): the width of its vectors and the annotations its components set.

The component comes through spaCy's registry (``nlp.add_pipe("elmo")``), so this module imports no
part of the component itself.
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import numpy as np

from ..io.conversion import check_language, pipeline_language
from ..io.loading import PIPELINE_FACTORY, locate_bilm
from .serve_body import annotations_of

PathLike = Union[str, Path]
# A server sees few texts twice (a cache of layers per segment pays for training's epochs, not for
# traffic) and it grew RSS by hundreds of MB over 1,000 requests: off unless asked for.
SERVER_FROZEN_CACHE_MB = 0.0
# run before serving: two sentences (a parser or sentence splitter shows itself), alone and then
# batched with a short one (the biLM's layout for one sentence and for a batch is made now, in one
# thread, not by two lanes at once on their first requests)
WARM_UP_TEXTS = ("The boats came back to the bank of the river at noon. We sat there all morning.", "A bank.")


@dataclass(frozen=True)
class Served:
    """What the server learnt from its warm-up texts: the vectors' width, the layers' count (L+1)
    and the ``serve_body.ANNOTATIONS`` the pipeline's components set."""

    width: int
    n_layers: int
    annotations: List[str]


def warm_up(nlp: Any) -> Served:
    """Run ``WARM_UP_TEXTS`` through ``nlp`` and say what its Docs hold."""
    doc = nlp(WARM_UP_TEXTS[0])
    list(nlp.pipe(WARM_UP_TEXTS, batch_size=len(WARM_UP_TEXTS)))
    n_layers, _, width = np.shape(doc._.elmo.layers)
    return Served(width=int(width), n_layers=int(n_layers), annotations=annotations_of(doc))


def serving_pipeline(
    pipeline: Optional[PathLike] = None,
    *,
    model: Optional[PathLike] = None,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    lang: Optional[str] = None,
    frozen_cache_mb: float = SERVER_FROZEN_CACHE_MB,
) -> Any:
    """The pipeline to serve, its weights loaded.

    pipeline (Optional[PathLike]): a spaCy pipeline folder (or package name) with an elmo component;
        its elmo components get ``frozen_cache_mb``.
    model, options, weights: else the biLM, as ``load_bilm`` takes it (a published name is downloaded
        on first use), in a blank pipeline of ``lang`` (default: the language the model records;
        one that records none needs it). With none of them, the shipped biLM in blank English.
    frozen_cache_mb (float): megabytes of layers the component keeps per segment (0: none).
    RETURNS (Language): the pipeline, initialized.
    """
    import spacy

    if frozen_cache_mb < 0:
        raise ValueError(f"frozen_cache_mb ({frozen_cache_mb}) must be 0 (no cache) or positive")
    if pipeline is not None:
        if model is not None or options is not None or weights is not None or lang is not None:
            raise ValueError("give either --pipeline or a biLM (--model, or --options and --weights, with --lang)")
        return spacy.load(pipeline, config=_cache_overrides(pipeline, frozen_cache_mb))
    source = locate_bilm(model, options=options, weights=weights, what="serve")
    language = lang or pipeline_language(source)
    check_language(language)
    nlp = spacy.blank(language)
    block: Dict[str, Any] = {"frozen_cache_mb": frozen_cache_mb}
    if options is not None:
        nlp.config["initialize"]["components"][PIPELINE_FACTORY] = {"options": str(options), "weights": str(weights)}
    elif model is not None:
        block["name"] = str(model)
    nlp.add_pipe(PIPELINE_FACTORY, config={"model": block})
    nlp.initialize()
    return nlp


def _cache_overrides(pipeline: PathLike, frozen_cache_mb: float) -> Dict[str, float]:
    """Config overrides that give each elmo component of a pipeline folder ``frozen_cache_mb``."""
    from spacy.util import load_config

    config_path = Path(pipeline) / "config.cfg"
    if not config_path.is_file():
        return {}  # a package name: spaCy finds it; its components keep their own cache size
    components = load_config(config_path)["components"]
    return {f"components.{name}.model.frozen_cache_mb": frozen_cache_mb
            for name, block in components.items() if block.get("factory") == PIPELINE_FACTORY}
