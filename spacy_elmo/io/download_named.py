"""Any model the `download` command names, fetched by the reader of its family: AllenNLP's pairs
(``download``), the contributed ones (``contributed``), ELMoForManyLangs zips (``archive``),
TensorFlow archives (``tf_layouts``), a repository on the Hugging Face Hub (``hub``), or a pair
given by two URLs; with what the registry says of
it, for the line shown before hundreds of megabytes arrive."""
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .archive import fetch_archive
from .contributed import fetch_contributed
from .download import fetch_pair, fetch_published, url_pair_dir
from .hub import fetch_hub, hub_cache, is_hub_id
from .registry import PUBLISHED_ARCHIVES, PUBLISHED_CONTRIBUTED, PUBLISHED_TF_MODELS, published_model
from .tf_layouts import fetch_tf_model


@dataclass(frozen=True)
class Downloaded:
    """What a download put in place, verified.

    model (Optional[Path]): a model read in place (an unpacked ELMoForManyLangs directory, a
        TensorFlow .tar.gz); None for a pair.
    options, weights (Optional[Path]): a pair in AllenNLP's format; None for a model read in place.
    language (Optional[str]): the model's language where the registry gives one (English for
        AllenNLP's own, which is also taken for a pair given by URL).
    """

    model: Optional[Path] = None
    options: Optional[Path] = None
    weights: Optional[Path] = None
    language: Optional[str] = None

    def __str__(self) -> str:
        if self.model is None:
            return f"Verified {self.options} and {self.weights}"
        return f"Verified {self.model}" if self.model.is_relative_to(hub_cache()) else f"Verified and unpacked {self.model}"


def describe_published(name: str) -> str:
    """RETURNS (str): one line on the published model ``name``: its format, where it comes from,
    its size where known and its training text (an unknown name is a ModelFileError listing the names)."""
    if is_hub_id(name):
        return f"{name}: a repository on the Hugging Face Hub, into huggingface_hub's cache ({hub_cache()})"
    if name in PUBLISHED_TF_MODELS:
        model = PUBLISHED_TF_MODELS[name]
        return f"{name}: a {model.layout} .tar.gz ({model.url}), trained on {model.trained_on}"
    if name in PUBLISHED_ARCHIVES:
        archive = PUBLISHED_ARCHIVES[name]
        return f"{name}: ELMoForManyLangs {archive.language} ({archive.url}), a zip of a few hundred MB"
    if name in PUBLISHED_CONTRIBUTED:
        contributed = PUBLISHED_CONTRIBUTED[name]
        where = contributed.archive or contributed.options_url()
        return f"{name}: AllenNLP's format ({where}), trained on {contributed.trained_on}"
    model = published_model(name)
    return (f"{model.name}: {model.shape}, {model.parameters}M parameters, about {model.size_mb:,.0f} MB "
            f"(trained on {model.trained_on})")


def download_named(name: str, *, directory: Optional[Path] = None, allow_http: bool = False) -> Downloaded:
    """The published model ``name`` (any family), downloaded unless already there.

    directory (Optional[Path]): where its files go (default: the cache's folder of the name; a
        Hub id's go to huggingface_hub's cache, and a directory for them is a ValueError).
    allow_http (bool): download over plain http too (with a warning).
    RETURNS (Downloaded): what is in place.
    """
    if is_hub_id(name):
        if directory is not None:
            raise ValueError(f"{name}: a Hub model goes to huggingface_hub's cache ({hub_cache()}), not to a "
                             "directory; --output names a pipeline to write with --as-pipeline")
        return Downloaded(fetch_hub(name).model_path())
    if name in PUBLISHED_TF_MODELS:
        tf_model = PUBLISHED_TF_MODELS[name]
        return Downloaded(fetch_tf_model(name, directory=directory, allow_http=allow_http), language=tf_model.language)
    if name in PUBLISHED_ARCHIVES:
        return Downloaded(fetch_archive(name, directory=directory, allow_http=allow_http), language=name)
    if name in PUBLISHED_CONTRIBUTED:
        options, weights = fetch_contributed(name, directory=directory, allow_http=allow_http)
        return Downloaded(None, options, weights, PUBLISHED_CONTRIBUTED[name].language)
    options, weights = fetch_published(name, directory=directory, allow_http=allow_http)
    return Downloaded(None, options, weights, "en")


def download_pair(options_url: str, weights_url: str, *, directory: Optional[Path] = None,
                  allow_http: bool = False) -> Downloaded:
    """A published pair given by its two URLs (``download.fetch_pair``), into ``directory`` or
    the cache's folder of the two URLs. RETURNS (Downloaded): the pair, taken as English."""
    options, weights = fetch_pair(options_url, weights_url, directory or url_pair_dir(options_url, weights_url),
                                  allow_http=allow_http)
    return Downloaded(None, options, weights, "en")
