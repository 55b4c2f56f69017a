"""A biLM converted: what a spaCy pipeline made of it needs (the biLM and the pipeline's language,
which the component then holds: ``pipeline.create_pipeline``), and a biLM written back to the
published formats. What `convert` and `download --as-pipeline` do, below the command line."""
from pathlib import Path
from typing import Optional, Tuple, Union

from ..bilm import BiLM
from .allennlp import export_allennlp
from .contributed import pipeline_refusal
from .efml import export_efml
from .loading import locate_bilm, resolve_bilm
from .sources import ModelSource

PathLike = Union[str, Path]


def pipeline_bilm(
    model: Optional[PathLike] = None,
    *,
    options: Optional[PathLike] = None,
    weights: Optional[PathLike] = None,
    lang: Optional[str] = None,
) -> Tuple[BiLM, str]:
    """The biLM a blank pipeline gets, and that pipeline's language, checked before anything is written.

    model, options, weights: the biLM, as ``locate_bilm`` takes it (a published name is downloaded).
    lang (Optional[str]): the pipeline's language; default: the model's (``pipeline_language``).
    RETURNS (Tuple[BiLM, str]): the loaded biLM and a language spaCy makes a blank pipeline of here.
    """
    refusal = pipeline_refusal(str(model)) if model is not None else None
    if refusal is not None:  # protein residues, not words: before a published model is downloaded
        raise ValueError(refusal)
    source = locate_bilm(model, options=options, weights=weights, what="convert")
    bilm = source.load()  # a missing or damaged file is the first thing to say, before the language
    lang = lang or pipeline_language(source)
    check_language(lang)
    return bilm, lang


def pipeline_language(source: ModelSource) -> str:
    """The language a pipeline for this biLM gets without ``--lang``: what its source records (a
    published name, an archive's or folder's meta.json, a pipeline's config, English for the
    shipped biLM). Everything else needs ``--lang``: a published pair given as files, a model
    directory of ours (pretrained on any text), an ELMoForManyLangs model or a TensorFlow
    checkpoint that records none: their model may be for any language."""
    if source.language:
        return source.language
    raise ValueError(
        f"{source.description} records no language; give it with --lang "
        "(an ISO 639 code spaCy knows, e.g. en, de, ru, ar; or xx for spaCy's multi-language tokenizer)"
    )


def check_language(lang: str) -> None:
    """Refuse, with what to do, a language whose blank pipeline spaCy cannot make here (unknown to
    spaCy, or a tokenizer needing a package this environment lacks: Japanese, Korean, Vietnamese,
    Chinese word segmentation)."""
    import spacy

    try:
        spacy.blank(lang)
    except ImportError as err:
        raise ValueError(
            f"spaCy cannot make a blank '{lang}' pipeline here: {err} (or use --lang xx, spaCy's "
            "multi-language tokenizer, and tokenize the text yourself)"
        ) from err


def export_pipeline_bilm(model: PathLike, output: Path, *, layout: str = "allennlp") -> Path:
    """Write the biLM of a spacy-elmo directory or of a pipeline's elmo component in a published layout.

    layout (str): "allennlp" (``output/options.json`` + ``output/weights.hdf5``, read by bilm-tf and
        AllenNLP) or "efml" (an ELMoForManyLangs model directory: an imported or fine-tuned EFML model).
    RETURNS (Path): ``output``.
    """
    if layout not in ("allennlp", "efml"):
        raise ValueError(f"{layout}: no such layout (allennlp, efml)")
    bilm = resolve_bilm(model, what="--model")
    if layout == "efml":
        export_efml(bilm, output)
    else:
        export_allennlp(bilm, output / "options.json", output / "weights.hdf5")
    return output
