"""The published ELMo biLMs by name: where their files are and what was reported for them.

AllenNLP's English models (``PUBLISHED_MODELS``: an options + HDF5 pair each) and the
ELMoForManyLangs models of 44 languages (``PUBLISHED_ARCHIVES``, by ISO 639 code: one zip each,
served by the NLPL repository over plain http, as ELMoForManyLangs' README links them), the
TensorFlow ones (``PUBLISHED_TF_MODELS``) and pairs in AllenNLP's format contributed by others
(``PUBLISHED_CONTRIBUTED``: AllenNLP's contributed models, SeqVec, clinical and Slovenian ELMo).

The URLs are those of AllenNLP's code (``allennlp/commands/elmo.py`` and the ``ElmoTokenEmbedder``
defaults name ``https://allennlp.s3.amazonaws.com/models/elmo/...``); AllenNLP's ELMo page lists the
same files in the bucket's path-style form (``https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/...``),
together with the parameter counts and the SRL and constituency-parsing F1 of each model. Sizes are the
weights' float32 parameters at 4 bytes each (the HDF5 file adds a few kilobytes). docs/download.md
cites the sources.
"""
import os
from dataclasses import dataclass
from typing import Dict, Mapping, Optional

from .errors import ModelFileError

DEFAULT_BASE_URL = "https://allennlp.s3.amazonaws.com/models/elmo/"
# another server (a mirror, or a local one in tests) holding the same layout below it
BASE_URL_ENV = "SPACY_ELMO_BASE_URL"


@dataclass(frozen=True)
class PublishedModel:
    """One published biLM.

    name (str): the short name ``load_bilm`` and ``download`` take.
    shape (str): AllenNLP's name for it, which is also its folder and file stem on the server.
    parameters (float): millions of parameters in the weights file (no softmax).
    size_mb (float): the weights file's size in megabytes (10^6 bytes).
    trained_on (str): the pretraining text.
    reported (str): what AllenNLP's ELMo page reports for it.
    options_sha256, weights_sha256 (Optional[str]): the files' SHA-256 where known; otherwise
        the digest of the first download is recorded beside the file and checked from then on.
    http_only (bool): the files are served over plain http alone, so downloading them needs no
        ``allow_http`` (still with a warning). Every entry below is served over https.
    vocab_path (Optional[str]): where the vocabulary of its published softmax is, below the base
        URL; None where no softmax was published. The softmax itself is
        ``SHAPE/elmo_SHAPE_softmax_weights.hdf5`` (``io/lm_head.py`` reads both).
    softmax_sha256, vocab_sha256 (Optional[str]): their SHA-256 where the publisher states one
        (AllenNLP states none).
    """

    name: str
    shape: str
    parameters: float
    size_mb: float
    trained_on: str
    reported: str
    options_sha256: Optional[str] = None
    weights_sha256: Optional[str] = None
    http_only: bool = False
    vocab_path: Optional[str] = None
    softmax_sha256: Optional[str] = None
    vocab_sha256: Optional[str] = None

    def options_url(self, base_url: Optional[str] = None) -> str:
        """RETURNS (str): the options JSON's URL below ``base_url`` (default: ``models_base_url()``)."""
        return f"{models_base_url(base_url)}{self.shape}/elmo_{self.shape}_options.json"

    def weights_url(self, base_url: Optional[str] = None) -> str:
        """RETURNS (str): the HDF5 weights' URL below ``base_url`` (default: ``models_base_url()``)."""
        return f"{models_base_url(base_url)}{self.shape}/elmo_{self.shape}_weights.hdf5"

    def softmax_url(self, base_url: Optional[str] = None) -> str:
        """RETURNS (str): the published softmax weights' URL (where ``vocab_path`` is set)."""
        return f"{models_base_url(base_url)}{self.shape}/elmo_{self.shape}_softmax_weights.hdf5"

    def vocab_url(self, base_url: Optional[str] = None) -> str:
        """RETURNS (str): the softmax vocabulary's URL (where ``vocab_path`` is set)."""
        return f"{models_base_url(base_url)}{self.vocab_path}"


BILLION_WORD = "1B Word Benchmark (about 800M tokens of WMT 2011 news)"
PUBLISHED_MODELS: Dict[str, PublishedModel] = {
    model.name: model
    for model in (
        PublishedModel(
            "small", "2x1024_128_2048cnn_1xhighway", 13.6, 54.4, BILLION_WORD,
            "SRL F1 83.62, constituency parsing F1 93.12",
        ),
        PublishedModel(
            "medium", "2x2048_256_2048cnn_1xhighway", 28.0, 112.1, BILLION_WORD,
            "SRL F1 84.04, constituency parsing F1 93.60",
        ),
        PublishedModel(
            "original", "2x4096_512_2048cnn_2xhighway", 93.6, 374.4, BILLION_WORD,
            "SRL F1 84.63, constituency parsing F1 93.85; the paper's model (SQuAD 85.8 F1, SNLI 88.7, "
            "SRL 84.6, coreference 70.4, CoNLL-2003 NER 92.22, SST-5 54.7)",
            # bilm-tf's README links the 793,471-word vocabulary at the top of the bucket
            vocab_path="vocab-2016-09-10.txt",
        ),
        PublishedModel(
            "original-5.5b", "2x4096_512_2048cnn_2xhighway_5.5B", 93.6, 374.4,
            "5.5B tokens: Wikipedia (1.9B) and WMT 2008-2012 news crawl (3.6B)",
            "SRL F1 84.93, constituency parsing F1 94.01; AllenNLP recommends it as the default",
            # beside the model's TensorFlow checkpoint (LAMA's download_models.sh fetches it there)
            vocab_path="2x4096_512_2048cnn_2xhighway_5.5B/tf_checkpoint/vocab-enwiki-news-500000.txt",
        ),
    )
}


@dataclass(frozen=True)
class PublishedArchive:
    """One published biLM served as a zip: an ELMoForManyLangs model's files at the top of the zip,
    without the architecture JSON its config.json names (``efml_architecture`` reads it as published).

    name (str): the ISO 639 code ``load_bilm`` and ``download`` take; also the model's language.
    language (str): the language's English name.
    url (str): the zip's address.
    sha256 (Optional[str]): the zip's SHA-256 where known; otherwise recorded at the first download.
    http_only (bool): served over plain http alone (see ``PublishedModel``).
    family (str): the format inside the zip.
    """

    name: str
    language: str
    url: str
    sha256: Optional[str] = None
    http_only: bool = True
    family: str = "elmoformanylangs"

    def archive_url(self, base_url: Optional[str] = None) -> str:
        """RETURNS (str): the zip's URL, below ``base_url`` or ``$SPACY_ELMO_NLPL_BASE_URL`` if given."""
        base = base_url or os.environ.get(NLPL_BASE_URL_ENV)
        if not base:
            return self.url
        return (base if base.endswith("/") else base + "/") + self.url.rsplit("/", 1)[-1]


# ELMoForManyLangs' README: the NLPL repository's entries 136-179 (release 1.1), one per language;
# trained on 20M words of the CoNLL 2018 shared task's Wikipedia + Common Crawl text per language.
_EFML_LANGUAGES = (
    ("ar", "Arabic"), ("bg", "Bulgarian"), ("ca", "Catalan"), ("cs", "Czech"), ("cu", "Old Church Slavonic"),
    ("da", "Danish"), ("de", "German"), ("el", "Greek"), ("en", "English"), ("es", "Spanish"),
    ("et", "Estonian"), ("eu", "Basque"), ("fa", "Persian"), ("fi", "Finnish"), ("fr", "French"),
    ("ga", "Irish"), ("gl", "Galician"), ("grc", "Ancient Greek"), ("he", "Hebrew"), ("hi", "Hindi"),
    ("hr", "Croatian"), ("hu", "Hungarian"), ("id", "Indonesian"), ("it", "Italian"), ("ja", "Japanese"),
    ("ko", "Korean"), ("la", "Latin"), ("lv", "Latvian"), ("nl", "Dutch"), ("nb", "Norwegian Bokmål"),
    ("nn", "Norwegian Nynorsk"), ("pl", "Polish"), ("pt", "Portuguese"), ("ro", "Romanian"), ("ru", "Russian"),
    ("sk", "Slovak"), ("sl", "Slovene"), ("sv", "Swedish"), ("tr", "Turkish"), ("ug", "Uyghur"),
    ("uk", "Ukrainian"), ("ur", "Urdu"), ("vi", "Vietnamese"), ("zh", "Chinese (traditional)"),
)
NLPL_BASE_URL = "http://vectors.nlpl.eu/repository/11/"
# another server holding the same NNN.zip files (a mirror, or a local one in tests)
NLPL_BASE_URL_ENV = "SPACY_ELMO_NLPL_BASE_URL"
PUBLISHED_ARCHIVES: Dict[str, PublishedArchive] = {
    code: PublishedArchive(code, language, f"{NLPL_BASE_URL}{number}.zip")
    for number, (code, language) in zip(range(136, 180), _EFML_LANGUAGES)  # in the numbers' order
}


@dataclass(frozen=True)
class PublishedTFModel:
    """One published biLM in a TensorFlow layout, served as one .tar.gz (read by ``bilm_tf``).

    name (str): the name ``load_bilm`` and ``download`` take.
    language (str): the model's language (ISO 639 code).
    url (str): the archive's address, as its publisher's code and docs give it.
    layout (str): "tfhub" (a TF1-Hub module: the biLM, no softmax) or "checkpoint" (a training
        checkpoint with options.json and vocab.txt: the biLM and its softmax).
    trained_on (str): the pretraining text, as the publisher names it.
    sha256 (Optional[str]): the archive's SHA-256 where the publisher states one (neither
        DeepPavlov nor TF-Hub states one): otherwise recorded at the first download and checked
        from then on.
    http_only (bool): served over plain http alone (see ``PublishedModel``).
    filename (Optional[str]): the name the archive is kept under, where the URL's last part is
        not a file name (TF-Hub's ``?tf-hub-format=compressed``).
    """

    name: str
    language: str
    url: str
    layout: str
    trained_on: str
    sha256: Optional[str] = None
    http_only: bool = True
    filename: Optional[str] = None

    @property
    def file_name(self) -> str:
        """RETURNS (str): the archive's file name (in the cache, and below a mirror's base URL)."""
        return self.filename or self.url.rsplit("/", 1)[-1]

    def archive_url(self, base_url: Optional[str] = None) -> str:
        """RETURNS (str): the archive's URL, below ``base_url`` or ``$SPACY_ELMO_TF_BASE_URL`` if given."""
        return mirrored(self.url, self.file_name, base_url or os.environ.get(TF_BASE_URL_ENV))


# DeepPavlov's Russian ELMo (docs "Pre-trained embeddings", configs/elmo/*.json, ELMoEmbedder's
# docstring): TF-Hub modules, and the language model its configs fine-tune (with the softmax);
# TF-Hub's own English module
DEEPPAVLOV_BASE_URL = "http://files.deeppavlov.ai/deeppavlov_data/"
# another server holding the same files (a mirror, or a local one in tests)
TF_BASE_URL_ENV = "SPACY_ELMO_TF_BASE_URL"
PUBLISHED_TF_MODELS: Dict[str, PublishedTFModel] = {
    model.name: model
    for model in (
        PublishedTFModel("deeppavlov-ru-news", "ru", f"{DEEPPAVLOV_BASE_URL}elmo_ru-news_wmt11-16_1.5M_steps.tar.gz",
                         "tfhub", "Russian WMT News 2011-2016"),
        PublishedTFModel("deeppavlov-ru-wiki", "ru", f"{DEEPPAVLOV_BASE_URL}elmo_ru-wiki_600k_steps.tar.gz",
                         "tfhub", "Russian Wikipedia"),
        PublishedTFModel("deeppavlov-ru-twitter", "ru",
                         f"{DEEPPAVLOV_BASE_URL}elmo_ru-twitter_2013-01_2018-04_600k_steps.tar.gz",
                         "tfhub", "Russian Twitter, 2013-01 to 2018-04"),
        PublishedTFModel("deeppavlov-ru-news-lm", "ru", f"{DEEPPAVLOV_BASE_URL}elmo-lm-ready4fine-tuning-ru-news.tar.gz",
                         "checkpoint", "Russian WMT News 2011-2016"),
        # TF-Hub's google/elmo (version 3): AllenNLP's "original" biLM as a TF1-Hub module
        PublishedTFModel("tfhub-elmo-3", "en", "https://tfhub.dev/google/elmo/3?tf-hub-format=compressed",
                         "tfhub", "1B Word Benchmark", http_only=False, filename="google-elmo-3.tar.gz"),
    )
}


def mirrored(url: str, file_name: str, base: Optional[str]) -> str:
    """RETURNS (str): ``url``, or ``file_name`` below ``base`` where a mirror is given."""
    if not base:
        return url
    return (base if base.endswith("/") else base + "/") + file_name


def models_base_url(base_url: Optional[str] = None) -> str:
    """The URL the published files are below: ``base_url``, else ``$SPACY_ELMO_BASE_URL``, else
    AllenNLP's bucket. RETURNS (str): ending in "/"."""
    url = base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
    return url if url.endswith("/") else url + "/"


def published_model(name: str, models: Optional[Mapping[str, PublishedModel]] = None) -> PublishedModel:
    """The published model called ``name``, with an error that lists the names.

    models (Optional[Mapping[str, PublishedModel]]): the table to look in (default: ``PUBLISHED_MODELS``).
    """
    models = PUBLISHED_MODELS if models is None else models
    if name not in models:
        raise ModelFileError(name, f"not found: neither an existing path nor a published model name ({published_names()})")
    return models[name]


def published_archive(name: str) -> PublishedArchive:
    """The published archive called ``name`` (an ISO 639 code), with an error that lists the names."""
    if name not in PUBLISHED_ARCHIVES:
        raise ModelFileError(name, f"not found: neither an existing path nor a published model name ({published_names()})")
    return PUBLISHED_ARCHIVES[name]


def published_names() -> str:
    """Every name ``load_bilm`` downloads, for messages: AllenNLP's, the languages, the TensorFlow ones,
    the contributed ones."""
    return (
        f"{', '.join(PUBLISHED_MODELS)}; ELMoForManyLangs by language: {', '.join(PUBLISHED_ARCHIVES)}; "
        f"TensorFlow: {', '.join(PUBLISHED_TF_MODELS)}; contributed: {', '.join(PUBLISHED_CONTRIBUTED)}"
    )


@dataclass(frozen=True)
class ContributedModel:
    """One biLM in AllenNLP's format (options.json + HDF5 weights) published by others than
    AllenNLP: at two URLs, or packed in one archive (.zip or .tar.gz) with the pair in a folder.

    name (str): the name ``load_bilm`` and ``download`` take.
    language (Optional[str]): the ISO 639 code of its text; None where its tokens are no natural
        language's words (see ``tokens``).
    tokens (str): what one token is: "words" (a language's words, as spaCy tokenizes them) or
        "residues" (one amino-acid letter of a protein sequence: SeqVec); a blank spaCy pipeline
        is made only for "words".
    trained_on (str): the pretraining text, as its publisher names it.
    source (str): the page or code that publishes the URLs.
    options_path, weights_path (Optional[str]): a pair's two files, below AllenNLP's bucket
        (``models_base_url``: AllenNLP's contributed models) where ``archive`` is None.
    archive (Optional[str]): the archive's URL, where the pair is packed.
    options_member, weights_member (Optional[str]): the pair's paths inside the archive, as
        published; the members are found by these base names (exactly one of each).
    sha256 (Optional[str]): the archive's SHA-256 where the publisher states one (none does).
    options_sha256, weights_sha256 (Optional[str]): a pair's SHA-256 where the publisher states
        one (none does): otherwise recorded at the first download and checked from then on.
    http_only (bool): served over plain http alone (see ``PublishedModel``); none of these is.
    """

    name: str
    language: Optional[str]
    trained_on: str
    source: str
    tokens: str = "words"
    options_path: Optional[str] = None
    weights_path: Optional[str] = None
    archive: Optional[str] = None
    options_member: Optional[str] = None
    weights_member: Optional[str] = None
    sha256: Optional[str] = None
    options_sha256: Optional[str] = None
    weights_sha256: Optional[str] = None
    http_only: bool = False

    @property
    def archive_name(self) -> str:
        """RETURNS (str): the archive's file name (in the cache, and below a mirror's base URL)."""
        return (self.archive or "").rsplit("/", 1)[-1]

    def options_url(self, base_url: Optional[str] = None) -> str:
        """RETURNS (str): a pair's options URL below ``base_url`` (default: ``models_base_url()``)."""
        return f"{models_base_url(base_url)}{self.options_path}"

    def weights_url(self, base_url: Optional[str] = None) -> str:
        """RETURNS (str): a pair's weights URL below ``base_url`` (default: ``models_base_url()``)."""
        return f"{models_base_url(base_url)}{self.weights_path}"

    def archive_url(self, base_url: Optional[str] = None) -> str:
        """RETURNS (str): the archive's URL, below ``base_url`` or ``$SPACY_ELMO_CONTRIBUTED_BASE_URL``
        if given (a mirror holding the archives by file name)."""
        return mirrored(self.archive or "", self.archive_name, base_url or os.environ.get(CONTRIBUTED_BASE_URL_ENV))


# another server holding the contributed archives by file name (a mirror, or a local one in tests);
# the pairs in AllenNLP's bucket follow $SPACY_ELMO_BASE_URL like AllenNLP's own models
CONTRIBUTED_BASE_URL_ENV = "SPACY_ELMO_CONTRIBUTED_BASE_URL"
# AllenNLP's ELMo page (allennlp-website, elmo.html), "Contributed ELMo Models": the bucket's
# path-style links (s3-us-west-2.amazonaws.com/allennlp/models/elmo/contributed/...)
_ALLENNLP_PAGE = "https://allennlp.org/elmo (Contributed ELMo Models)"
PUBLISHED_CONTRIBUTED: Dict[str, ContributedModel] = {
    model.name: model
    for model in (
        ContributedModel(
            "pubmed", "en", "PubMed", _ALLENNLP_PAGE,
            options_path="contributed/pubmed/elmo_2x4096_512_2048cnn_2xhighway_options.json",
            weights_path="contributed/pubmed/elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5",
        ),
        ContributedModel(
            "pt-wikipedia", "pt", "Portuguese Wikipedia", _ALLENNLP_PAGE,
            options_path="contributed/pt/wikipedia/options.json",
            weights_path="contributed/pt/wikipedia/elmo_pt_weights.hdf5",
        ),
        ContributedModel(
            "pt-brwac", "pt", "brWaC (Brazilian Portuguese web corpus)", _ALLENNLP_PAGE,
            options_path="contributed/pt/brwac/options.json",
            weights_path="contributed/pt/brwac/elmo_pt_weights_dgx1.hdf5",
        ),
        # SeqVec (Heinzinger et al. 2019): its README links the zip; DeepCoil's code unpacks
        # uniref50_v2/options.json and uniref50_v2/weights.hdf5 from it
        ContributedModel(
            "seqvec", None, "UniRef50 protein sequences", "https://github.com/Rostlab/SeqVec (README)",
            tokens="residues", archive="https://rostlab.org/~deepppi/seqvec.zip",
            options_member="uniref50_v2/options.json", weights_member="uniref50_v2/weights.hdf5",
        ),
        # clinical concept extraction (Zhu, Paschalidis and Tahmasebi 2018): the README links the release asset and
        # lists what it unpacks to, elmo/options.json beside elmo/mimic_wiki.hdf5 (and vocab.txt)
        ContributedModel(
            "clinical-mimic", "en", "MIMIC-III clinical notes (the weights file is named mimic_wiki.hdf5)",
            "https://github.com/noc-lab/clinical_concept_extraction (README)",
            archive="https://github.com/noc-lab/clinical_concept_extraction/releases/download/latest/elmo.tar.gz",
            options_member="elmo/options.json", weights_member="elmo/mimic_wiki.hdf5",
        ),
        # EMBEDDIA's Slovenian ELMo (Ulčar and Robnik-Šikonja 2020), CLARIN.SI handle 11356/1277:
        # slovenian-elmo.tar.gz unpacks to slovenian/options.json and slovenian/slovenian-elmo-weights.hdf5
        ContributedModel(
            "embeddia-sl", "sl", "Slovenian corpora (EMBEDDIA project)",
            "http://hdl.handle.net/11356/1277",
            archive="https://www.clarin.si/repository/xmlui/bitstream/handle/11356/1277/slovenian-elmo.tar.gz",
            options_member="slovenian/options.json", weights_member="slovenian/slovenian-elmo-weights.hdf5",
        ),
    )
}
