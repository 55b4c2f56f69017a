"""Build a wider open-licence English pretraining corpus: one tokenized sentence per line.

A superset of `lab/corpus/prepare_corpus.py --wikitext --all-open --kjv` (Gutenberg, movie reviews, the
King James Bible, WikiText-2 validation, EWT train, WNUT17 train; read with that script's functions),
plus the UD English ATIS train text (CC BY-SA 4.0) and the English prose of open-licence Debian
packages: dictionaries (GCIDE, WordNet glosses, FOLDOC, the Jargon File, The Devil's Dictionary),
manuals (Python, Django, PostgreSQL, Git, Perl, R, Guile, Octave, Bash, GNU standards and GNU
manuals, SciPy, pandas, SQLAlchemy, scikit-learn, SymPy, Astropy, statsmodels, Racket, GnuCash,
GNOME help, KiCad, Sphinx, CMake, Node.js, Rust, Maxima, the Linux kernel's
documentation, the Debian handbook, reference, policy and developer documents, the LibreOffice help),
the BSD fortunes, and general English prose: the World English Bible, Matthew Henry's Concise
Commentary, Spurgeon's Treasury of David and the Scofield Reference Notes (public-domain CrossWire
SWORD modules, read from their compressed files), the story, dialogue and unit descriptions of The
Battle for Wesnoth and its campaigns, Dungeon Crawl's descriptions, and Freeciv's help texts and
nation legends. Each source is of a kind, "general" (ordinary English: the dataset sources, the
dictionaries of ordinary English, the fortunes, the Bibles and commentaries, the games' text) or
"technical" (the computing dictionaries and the manuals). Each package's text is taken from its
installed files (a missing package is an error naming the `apt-get install` command); markup is
stripped (HTML, Texinfo info nodes and menus, POD, dictd entry heads, pronunciations, citations,
OSIS notes and Bible references, the markup of WML and Freeciv strings), code blocks, tables and
headings are dropped, and only sentences that read as English prose are kept (at least four
tokens, mostly words, at least one English function word, ending like a sentence).

Sentences are split and tokenized with spaCy's rule-based English tokenizer and sentencizer as in
prepare_corpus.py, then

- deduplicated exactly across all sources (hash of the normalised sentence: lower-cased, only
  letters and digits kept, so tokenization differences do not hide a duplicate);
- checked against every evaluation set (EWT dev and test, UD English PUD, CoNLL-2003 testa and
  testb, WNUT17 test, WiC train/dev/test, the Senseval-2 lexical-sample contexts, WikiText-2 test)
  by the same hash; a sentence found there is removed and counted per source and per set.

    apt-get install dict-gcide wordnet-base dict-foldoc dict-jargon dict-devil python3.11-doc \\
        python-django-doc postgresql-doc-15 git-doc perl-doc r-doc-info guile-3.0-doc octave-doc \\
        bash-doc gnu-standards linux-doc-6.1 debian-handbook debian-reference-en debian-policy \\
        python-scipy-doc python-pandas-doc python-sqlalchemy-doc python-sklearn-doc python-sympy-doc \\
        python-astropy-doc python-statsmodels-doc racket-doc gnucash-docs gnome-user-docs kicad-doc-en \\
        sphinx-doc cmake-doc nodejs-doc rust-doc \\
        maxima-doc developers-reference debian-faq maint-guide fortunes fortunes-min bible-kjv \\
        sword-text-web sword-comm-mhcc sword-comm-tdavid sword-comm-scofield crawl-common freeciv-data \\
        libreoffice-help-en-us wesnoth-1.16-data wesnoth-1.16-did wesnoth-1.16-dm wesnoth-1.16-dw \\
        wesnoth-1.16-ei wesnoth-1.16-httt wesnoth-1.16-l wesnoth-1.16-low wesnoth-1.16-nr wesnoth-1.16-sof \\
        wesnoth-1.16-sota wesnoth-1.16-sotbe wesnoth-1.16-thot wesnoth-1.16-trow wesnoth-1.16-tsg \\
        wesnoth-1.16-ttb wesnoth-1.16-utbs
    python -m lab.corpus.wide_corpus --datasets assets/datasets --output corpus/wide

Writes OUTPUT/pretrain/train/train-XX.txt and the held-out OUTPUT/pretrain/dev.txt (the layout of
prepare_corpus.py, read by `pretrain`/`finetune --paths.train OUTPUT/pretrain/train --paths.dev
OUTPUT/pretrain/dev.txt`), OUTPUT/READY (the total token count, written as soon as the pretraining
files are complete, for a run waiting on them), OUTPUT/corpus-stats.json (per source: kind, package, version,
licence, sentences and tokens kept, duplicates and evaluation overlap removed, out-of-vocabulary rate under
--vocab; the tokens of each kind and the general share) and OUTPUT/ATTRIBUTION.md.
"""
import argparse
import gzip
import hashlib
import html.parser
import json
import random
import re
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Set

import spacy
from spacy.lang.en.stop_words import STOP_WORDS

from spacy_elmo.records.provenance import data_record, mark_start, portable_args, provenance

from lab.corpus import prepare_corpus

# ----------------------------------------------------------------------------------------------
# The Debian sources: kind (general English or technical text), package, files (a pattern on `dpkg -L`), reader,
# licence, attribution


def _source(name, kind, packages, pattern, reader, licence, attribution):
    return {"name": name, "kind": kind, "packages": packages, "pattern": pattern, "reader": reader,
            "licence": licence, "attribution": attribution}


DEBIAN_SOURCES = [
    _source("GCIDE", "general", ["dict-gcide"], r"/gcide\.dict\.dz$", "dictd", "GPL-2+",
            "The GNU Collaborative International Dictionary of English (GCIDE) 0.48, derived from Webster's "
            "Revised Unabridged Dictionary (1913, C. & G. Merriam Co.) and WordNet, edited by Patrick Cassidy "
            "and volunteers (MICRA, Inc.); definitions and quotations."),
    _source("WordNet glosses", "general", ["wordnet-base"], r"/wordnet/data\.(noun|verb|adj|adv)$", "wordnet",
            "WordNet 3.0 licence",
            "WordNet 3.0, Princeton University (G. A. Miller et al.): synset glosses and example sentences. "
            "WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved; use, copy, modify and "
            "distribute permitted under the WordNet 3.0 licence."),
    _source("The Devil's Dictionary", "general", ["dict-devil"], r"/devil\.dict\.dz$", "dictd", "public domain",
            "Ambrose Bierce, The Devil's Dictionary (1911)."),
    _source("Jargon File", "technical", ["dict-jargon"], r"/jargon\.dict\.dz$", "dictd", "public domain",
            "The Jargon File 4.4.7, edited by Eric S. Raymond."),
    _source("FOLDOC", "technical", ["dict-foldoc"], r"/foldoc\.dict\.dz$", "dictd", "GFDL-1.1+",
            "The Free On-line Dictionary of Computing, edited by Denis Howe (foldoc.org)."),
    _source("Python documentation", "technical", ["python3.11-doc"], r"/html/.*\.html$", "html", "PSF-2.0",
            "The Python 3.11 documentation, Copyright Python Software Foundation, under the PSF License "
            "Agreement."),
    _source("Django documentation", "technical", ["python-django-doc"], r"/html/.*\.html$", "html", "BSD-3-Clause",
            "The Django 3.2 documentation, Copyright Django Software Foundation and individual contributors."),
    _source("PostgreSQL documentation", "technical", ["postgresql-doc-15"], r"/html/.*\.html$", "html", "PostgreSQL",
            "The PostgreSQL 15 documentation, Copyright The PostgreSQL Global Development Group, under the "
            "PostgreSQL licence (BSD-like)."),
    _source("Git documentation", "technical", ["git-doc"], r"\.html$", "html", "GPL-2",
            "The Git 2.39 documentation, Copyright Linus Torvalds, Junio C Hamano and the Git contributors."),
    _source("Linux kernel documentation", "technical", ["linux-doc-6.1"],
            r"/html/(?!translations/).*\.html$", "html", "GPL-2",
            "The Linux 6.1 kernel documentation (Documentation/, rendered by Sphinx), Copyright the Linux "
            "kernel developers; GPL-2 (a few files dual-licensed, as Debian's copyright file lists)."),
    _source("Debian Administrator's Handbook", "technical", ["debian-handbook"], r"/html/en-US/.*\.html$", "html",
            "GPL-2+ or CC BY-SA 3.0",
            "The Debian Administrator's Handbook (Debian 11), Raphael Hertzog and Roland Mas."),
    _source("Debian Reference", "technical", ["debian-reference-en"], r"\.en\.html$", "html", "GPL-2+",
            "Debian Reference 2.100, Osamu Aoki."),
    _source("Debian Policy", "technical", ["debian-policy"], r"\.html$", "html", "GPL-2+",
            "The Debian Policy Manual 4.6.2.0, the Debian policy editors and contributors."),
    _source("Octave manual", "technical", ["octave-doc"], r"/octave\.html/.*\.html$", "html", "GPL-3+",
            "The GNU Octave 7.3 manual, John W. Eaton and the Octave contributors."),
    _source("GNU coding standards", "technical", ["gnu-standards"], r"/info/.*\.info(-\d+)?\.gz$", "info", "GFDL-1.3+",
            "GNU Coding Standards and Information for Maintainers of GNU Software, Free Software Foundation."),
    _source("Bash manual", "technical", ["bash-doc"],
            r"/info/.*\.info(-\d+)?\.gz$", "info", "GFDL-1.3 (no invariant sections)",
            "The GNU Bash Reference Manual, Chet Ramey and Brian Fox, Free Software Foundation."),
    _source("Guile manual", "technical", ["guile-3.0-doc"], r"/info/.*\.info(-\d+)?\.gz$", "info", "GFDL-1.3+",
            "The Guile 3.0 Reference Manual, Free Software Foundation."),
    _source("R manuals", "technical", ["r-doc-info"],
            r"/info/.*\.info(-\d+)?\.gz$", "info", "GPL-2 (permissive manual notice)",
            "The R 4.2 manuals, the R Core Team."),
    _source("SciPy documentation", "technical", ["python-scipy-doc"], r"/html/(?!_modules/|_static/).*\.html$", "html",
            "BSD-3-Clause", "The SciPy 1.10 documentation, Copyright the SciPy Developers."),
    _source("pandas documentation", "technical", ["python-pandas-doc"],
            r"/html/(?!_modules/|_static/).*\.html$", "html",
            "BSD-3-Clause", "The pandas 1.5 documentation, Copyright the pandas development team (AQR Capital "
            "Management, Lambda Foundry, PyData)."),
    _source("SQLAlchemy documentation", "technical", ["python-sqlalchemy-doc"],
            r"/html/(?!_modules/|_static/).*\.html$", "html",
            "MIT", "The SQLAlchemy 1.4 documentation, Copyright Michael Bayer and the SQLAlchemy authors."),
    _source("scikit-learn documentation", "technical", ["python-sklearn-doc"],
            r"/html/(?!_modules/|_static/).*\.html$", "html",
            "BSD-3-Clause", "The scikit-learn 1.2 documentation, Copyright the scikit-learn developers."),
    _source("SymPy documentation", "technical", ["python-sympy-doc"], r"/html/(?!_modules/|_static/).*\.html$", "html",
            "BSD-3-Clause", "The SymPy 1.11 documentation, Copyright the SymPy Development Team."),
    _source("Astropy documentation", "technical", ["python-astropy-doc"],
            r"/html/(?!_modules/|_static/).*\.html$", "html",
            "BSD-3-Clause", "The Astropy 5.2 documentation, Copyright the Astropy Developers."),
    _source("statsmodels documentation", "technical", ["python-statsmodels-doc"],
            r"/html/(?!_modules/|_static/).*\.html$",
            "html", "BSD-3-Clause", "The statsmodels 0.13 documentation, Copyright Jonathan E. Taylor, Josef "
            "Perktold, Skipper Seabold and the statsmodels developers."),
    _source("Racket documentation", "technical", ["racket-doc"], r"/doc/racket/.*\.html$", "html",
            "LGPL-2.1+ (as Debian records it; MIT or Apache-2.0 upstream since Racket 8)",
            "The Racket 8.7 documentation (the Guide, the Reference and the library manuals), PLT Design Inc. "
            "and the Racket contributors."),
    _source("GnuCash documentation", "technical", ["gnucash-docs"], r"/gnucash-[a-z]+-en/.*\.html$", "html",
            "GFDL-1.1+ (no invariant sections)", "The GnuCash 4.13 Tutorial and Concepts Guide and Help "
            "Manual, the GnuCash Documentation Team."),
    _source("GNOME help", "technical", ["gnome-user-docs"], r"/help/C/.*\.page$", "html", "CC BY-SA 3.0",
            "The GNOME Help (gnome-user-docs 43), Shaun McCance and the GNOME Documentation Project."),
    _source("KiCad documentation", "technical", ["kicad-doc-en"], r"/help/en/.*\.html$", "html", "GPL-3+",
            "The KiCad 6.0 manuals, the KiCad developers."),
    _source("Sphinx documentation", "technical", ["sphinx-doc"], r"/html/(?!_modules/|_static/).*\.html$", "html",
            "BSD-2-Clause", "The Sphinx 5.3 documentation, Copyright the Sphinx team."),
    _source("CMake documentation", "technical", ["cmake-doc"], r"\.html$", "html", "BSD-3-Clause",
            "The CMake 3.25 documentation, Copyright Kitware, Inc. and contributors."),
    _source("Node.js documentation", "technical", ["nodejs-doc"], r"/api/.*\.html$", "html", "MIT",
            "The Node.js 18 API documentation, Copyright Node.js contributors."),
    _source("Rust documentation", "technical", ["rust-doc"],
            r"/html/(?!src/|core/|alloc/|test/|proc_macro/).*\.html$", "html", "MIT or Apache-2.0",
            "The Rust 1.63 documentation (The Rust Programming Language, the Reference, the standard library "
            "and the other books), Copyright the Rust project developers."),
    _source("Maxima manual", "technical", ["maxima-doc"], r"\.html$", "html", "GPL-2",
            "The Maxima manual, William Schelter and the Maxima contributors."),
    _source("Debian developer documents", "technical", ["developers-reference", "debian-faq", "maint-guide"],
            r"(developers-reference/.*|\.en)\.html$", "html", "GPL-2 (developers-reference), GPL-2+ (debian-faq), "
            "MIT or GPL-2+ (maint-guide)",
            "Debian Developer's Reference, the Debian FAQ and the Debian New Maintainers' Guide, the Debian "
            "documentation team and contributors."),
    _source("GNU manuals", "technical", ["coreutils", "findutils", "sed", "gzip", "diffutils", "wget"],
            r"/info/.*\.info(-\d+)?\.gz$", "info", "GFDL-1.3+",
            "The GNU Coreutils, Findutils, sed, gzip, Diffutils and Wget manuals, Free Software Foundation."),
    _source("Perl documentation", "technical", ["perl-doc"], r"\.pod$", "pod", "GPL-1+ or Artistic",
            "The Perl 5.36 documentation (perlfaq, perltoc and the perl*.pod manuals), Larry Wall and the Perl "
            "contributors."),
    _source("fortunes", "general", ["fortunes", "fortunes-min"], r"/games/fortunes/[^/.]+$", "fortune", "BSD-3-Clause",
            "The fortune-mod cookie files (BSD fortune, NetBSD and Debian contributors); the offensive "
            "section is not installed or read."),
    _source("World English Bible", "general", ["sword-text-web"], r"/ztext/engWEB2015eb/[on]t\.bzv$", "sword-bible",
            "public domain", "The World English Bible with the Deuterocanon (2020 stable text, eBible.org), "
            "as the CrossWire SWORD module engWEB2015eb; translators' notes, headings and references left out. "
            "\"World English Bible\" is a trademark of eBible.org."),
    _source("Matthew Henry's Concise Commentary", "general", ["sword-comm-mhcc"], r"/zcom/mhcc/[on]t\.[bc]zv$",
            "sword-commentary", "public domain",
            "Matthew Henry, Concise Commentary on the Whole Bible (Moody Press edition; text from CCEL), as the "
            "CrossWire SWORD module MHCC; Bible references left out."),
    _source("Treasury of David", "general", ["sword-comm-tdavid"], r"/zcom/tdavid/[on]t\.[bc]zv$", "sword-commentary",
            "public domain", "C. H. Spurgeon, The Treasury of David (1869-1885), as the CrossWire SWORD module "
            "TDavid; Bible references left out."),
    _source("Scofield Reference Notes", "general", ["sword-comm-scofield"], r"/zcom/scofield/[on]t\.[bc]zv$",
            "sword-commentary", "public domain (1917 edition)",
            "C. I. Scofield, Scofield Reference Notes, 1917 edition (text from Wikisource), as the CrossWire SWORD "
            "module Scofield; Bible references left out."),
    _source("Wesnoth campaigns", "general",
            ["wesnoth-1.16-data"] + [f"wesnoth-1.16-{c}" for c in ("did", "dm", "dw", "ei", "httt", "l", "low", "nr",
                                                                  "sof", "sota", "sotbe", "thot", "trow", "tsg", "ttb",
                                                                  "utbs")],
            r"/wesnoth/1\.16/data/(?!test/|schema/|gui/).*\.cfg$", "wml", "GPL-2+",
            "The Battle for Wesnoth 1.16: the story, dialogue, unit descriptions and help text of the game and its "
            "mainline campaigns, David White and the Wesnoth contributors."),
    _source("Dungeon Crawl descriptions", "general", ["crawl-common"],
            r"/crawl/dat/descript/(?!quotes\.txt)[a-z_]+\.txt$",
            "crawl", "GPL-2+",
            "Dungeon Crawl Stone Soup 0.28: the descriptions of monsters, gods, items, places and spells (not the "
            "quotations file), Linley Henzell, the Stone Soup team and contributors."),
    _source("Freeciv help", "general", ["freeciv-data"],
            r"/freeciv/(helpdata\.txt|nation/[a-z_]+\.ruleset|[a-z0-9]+/[a-z_]+\.ruleset)$", "freeciv", "GPL-2+",
            "Freeciv 3.0: the help texts, the rulesets' help for units, buildings, technologies and governments, "
            "and the nations' legends, the Freeciv project and contributors."),
    _source("LibreOffice help", "technical", ["libreoffice-help-en-us"], r"/help/en-US/text/.*\.html$", "html",
            "MPL-2.0 (some files also Apache-2.0)",
            "The LibreOffice 7.4 help (en-US), The Document Foundation and the LibreOffice contributors, partly "
            "based on Apache OpenOffice (Apache Software Foundation)."),
]

# the datasets folders whose sentences are removed from the corpus (evaluation_hashes)
EVALUATION_FOLDERS = ("ud_english_ewt", "ud_english_pud", "conll2003", "wnut17", "wic", "senseval2_nltk", "lm_wikitext2")

DATASET_SOURCES = {
    # name: (dataset folder, kind, licence, attribution); read through prepare_corpus.pretraining_sources
    "Gutenberg": ("lm_gutenberg_nltk2008", "general", "public domain",
                  "Project Gutenberg selections as packaged by NLTK (2008): Austen, Blake, Chesterton, Melville, "
                  "Milton, Shakespeare, Whitman."),
    "movie reviews": ("domain_movie_reviews", "general", "CC BY 4.0",
                      "Movie Review Data, polarity dataset v2.0, (c) 2004 Bo Pang and Lillian Lee."),
    "King James Bible": ("bible-kjv", "general", "public domain",
                         "The King James Version of the Bible (1611), verse text as printed by Debian's bible-kjv."),
    "WikiText-2 valid": ("lm_wikitext2", "general", "CC BY-SA 3.0",
                         "WikiText-2 (v1) validation set, Merity et al. 2016 (Salesforce); sentences with <unk> left out."),
    "EWT train": ("ud_english_ewt", "general", "CC BY-SA 4.0",
                  "UD English-EWT train raw text: English Web Treebank text by Google Inc. / LDC, UD annotation by "
                  "the UD contributors."),
    "WNUT17 train": ("wnut17", "general", "CC BY 4.0", "WNUT17 emerging-entities training tweets, Derczynski et al. 2017."),
    "ATIS train": ("ud_english_atis", "general", "CC BY-SA 4.0",
                   "UD English-Atis train raw text: the ATIS flight queries as a UD treebank by Aslı Kuzgun, Neslihan Cesur and Olcay Taner Yıldız."),
}

# ----------------------------------------------------------------------------------------------
# Readers: installed files to paragraphs of plain text


class _HTMLText(html.parser.HTMLParser):
    """Paragraph text of an HTML page: code, tables, headings, navigation and scripts left out."""

    BLOCK = {"p", "li", "dd", "dt", "div", "blockquote", "td", "th", "tr", "ul", "ol", "dl", "section",
             "br", "h1", "h2", "h3", "h4", "h5", "h6", "title", "body", "article", "aside", "figure", "caption"}
    SKIP = {"pre", "script", "style", "table", "nav", "head", "h1", "h2", "h3", "h4", "h5", "h6", "title",
            "dt", "caption", "figure", "footer", "header", "select", "textarea", "button", "form", "svg"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: List[str] = []
        self.skipping: List[str] = []
        self.buffer: List[str] = []

    def flush(self) -> None:
        text = " ".join("".join(self.buffer).split())
        if text and not self.skipping:
            self.paragraphs.append(text)
        self.buffer = []

    def handle_starttag(self, tag, attrs):
        if tag in self.BLOCK or tag in self.SKIP:
            self.flush()
        if tag in self.SKIP:
            self.skipping.append(tag)
        elif tag == "div" and any(k == "class" and v and re.search(r"highlight|sidebar|related|footer|toc|nav", v)
                                  for k, v in attrs):
            self.skipping.append("div")

    def handle_endtag(self, tag):
        if tag in self.BLOCK or tag in self.SKIP:
            self.flush()
        if self.skipping and self.skipping[-1] == tag:
            self.skipping.pop()

    def handle_data(self, data):
        if not self.skipping:
            self.buffer.append(data)


def html_paragraphs(text: str) -> List[str]:
    """The paragraphs of an HTML page as plain text (code, tables, headings and navigation dropped).

    text (str): the page.
    RETURNS (List[str]): paragraph texts, whitespace collapsed.
    """
    parser = _HTMLText()
    try:
        parser.feed(text)
        parser.close()
    except AssertionError:  # malformed markup: keep what was read
        pass
    parser.flush()
    return parser.paragraphs


UNDERLINE = re.compile(r"^\s*([=*\-.~_#+])\1{2,}\s*$")


def info_paragraphs(text: str) -> Iterator[str]:
    """The prose paragraphs of a Texinfo info file: node headers, menus, examples and headings dropped.

    text (str): the decompressed info file.
    YIELDS (str): paragraph texts, whitespace collapsed, `*note X::` references reduced to X.
    """
    for node in text.split("\x1f"):
        lines = node.split("\n")
        if lines and lines[0].strip() == "":
            lines = lines[1:]
        if not lines or not lines[0].startswith("File:"):
            continue  # the tag table, indirect tables, the preamble
        for block in re.split(r"\n\s*\n", "\n".join(lines[1:])):
            rows = [row for row in block.split("\n") if row.strip()]
            if not rows:
                continue
            if any(UNDERLINE.match(row) for row in rows):
                continue  # a heading
            if rows[0].startswith("* ") and "::" in block or rows[0].startswith("* Menu:"):
                continue  # a menu
            if len(rows[0]) - len(rows[0].lstrip()) >= 6 and not re.match(r"\s+(\*|\d+\.)\s", rows[0]):
                continue  # an example, a display or a definition's head
            rows = [row for row in rows if not row.lstrip().startswith("-- ")]
            paragraph = " ".join(" ".join(rows).split())
            paragraph = re.sub(r"\*[Nn]ote\s+([^:]+?)::", r"\1", paragraph)
            paragraph = re.sub(r"\*[Nn]ote\s+[^:]+:\s*([^.,]+)[.,]", r"\1", paragraph)
            paragraph = re.sub(r"^(\*|\d+\.)\s+", "", paragraph)
            if paragraph:
                yield paragraph


POD_CODE = re.compile(r"[A-Z]<(?:<+\s(.*?)\s>+|([^<>]*))>")


def pod_paragraphs(text: str) -> Iterator[str]:
    """The ordinary paragraphs of a POD file: commands and verbatim (indented) paragraphs dropped, formatting codes
    reduced to their text (``L<text|link>`` to text, ``X<>``, ``Z<>`` and ``E<>`` escapes resolved).

    text (str): the POD file.
    YIELDS (str): paragraph texts, whitespace collapsed.
    """
    escapes = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/"}
    for block in re.split(r"\n\s*\n", text):
        if not block.strip() or block.startswith("=") or block[:1].isspace():
            continue
        paragraph = " ".join(block.split())
        for _ in range(5):  # nested codes
            paragraph = re.sub(r"[XZ]<[^<>]*>", "", paragraph)
            paragraph = re.sub(r"E<(\w+)>", lambda m: escapes.get(m.group(1), ""), paragraph)
            paragraph = re.sub(r"L<([^<>|]*)\|[^<>]*>", r"\1", paragraph)
            paragraph = POD_CODE.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), paragraph)
        yield paragraph


POS_ABBREVIATION = r"(?:n|v|a|adj|adv|t|i|p|pl|sing|imp|pr|vb|prep|conj|interj|pron|superl|compar|obs|fem|masc)\."


def dictd_entries(dict_text: str, index_text: str) -> Iterator[tuple]:
    """The (headword, entry text) pairs of a dictd database, each entry once, its header entries left out.

    dict_text (str): the decompressed .dict file.
    index_text (str): its .index file (headword, base64 offset, base64 length per line).
    YIELDS (tuple): (headword, entry text).
    """
    alphabet = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}

    def number(code: str) -> int:
        value = 0
        for char in code:
            value = value * 64 + alphabet[char]
        return value

    data = dict_text.encode("utf-8")
    seen: Set[int] = set()
    for line in index_text.splitlines():
        fields = line.split("\t")
        if len(fields) < 3 or fields[0].startswith("00") or fields[0].startswith("00database"):
            continue
        offset, length = number(fields[1]), number(fields[2])
        if offset in seen:
            continue
        seen.add(offset)
        yield fields[0], data[offset:offset + length].decode("utf-8", errors="replace")


def dictd_paragraphs(headword: str, entry: str) -> Iterator[str]:
    """The prose of one dictd entry: its head (headword, pronunciation, part of speech), etymologies and citations
    in brackets, cross-reference braces, URLs, subject tags, attributions (``--Shak.``) and synonym lists removed.

    headword (str): the entry's headword (as its index gives it).
    entry (str): the entry's text.
    YIELDS (str): paragraph texts.
    """
    blocks = re.split(r"\n\s*\n", entry.strip("\n"))
    for k, block in enumerate(blocks):
        rows = block.split("\n")
        if k == 0 and len(rows) > 1 and not rows[0].startswith(" ") and not rows[1].startswith(" "):
            rows = rows[1:]  # FOLDOC, Jargon: headword line, then an alias line
        text = " ".join(" ".join(rows).split())
        if re.match(r"(Syn|Ant|See also|Derivatives?|Usage)\s*:", text):
            continue
        text = re.sub(r"\\[^\\]{0,80}\\", " ", text)  # pronunciations
        text = re.sub(r"https?://\S+|\b\w+@\w+\.\w+", " ", text)
        for _ in range(3):
            text = re.sub(r"\[[^\[\]]*\]", " ", text)  # etymologies, [1913 Webster], [Obs.]
        text = re.sub(r"\{([^{}]*)\}", r"\1", text)
        text = re.sub(r"<[^<>]*>", " ", text)  # FOLDOC subject tags
        text = re.sub(r"\s--\s?[A-Z][\w.'&,\- ]{0,60}$", "", text)  # a quotation's author at the end
        text = re.sub(r"\s--\s?[A-Z][\w.'&]*(\s[A-Z][\w.'&]*){0,3}\.?(?=\s|$)", "", text)
        text = " ".join(text.split())
        if k == 0:
            head = re.escape(headword.strip())
            text = re.sub(rf"^{head}\s*,?\s*", "", text, flags=re.IGNORECASE)
            text = re.sub(rf"^(?:{POS_ABBREVIATION}\s*[,;&]?\s*)+", "", text, flags=re.IGNORECASE)
            text = re.sub(r"^(?:p\. p\.|p\. a\.)\s*[,;]?\s*", "", text)
        text = re.sub(r"^(?:\d+\.|\(?[a-z0-9]\)|Note:)\s*", "", text)
        text = text.strip(" ,;")
        if text:
            yield text


def wordnet_paragraphs(line: str) -> Iterator[str]:
    """The gloss of one WordNet data line: its definitions (capitalised, with a full stop) and its quoted examples.

    line (str): a line of data.noun, data.verb, data.adj or data.adv.
    YIELDS (str): one text per definition and example.
    """
    if line.startswith(" ") or " | " not in line:
        return
    gloss = line.split(" | ", 1)[1].strip()
    for part in re.split(r";\s*", gloss):
        part = part.strip()
        if not part:
            continue
        if part.startswith('"'):
            example = part.strip('"').strip()
            example = re.sub(r'"\s*-\s*[A-Z][\w. ]*$', "", example).strip('" ')
            if example:
                yield example
        else:
            part = re.sub(r"^\([^)]*\)\s*", "", part)
            if part:
                yield part[0].upper() + part[1:] + ("" if part[-1] in ".!?" else ".")


SWORD_DROP = re.compile(r"<(note|rdg|catchWord|reference)\b[^>]*(?<!/)>.*?</\1>", re.DOTALL)
SWORD_HEADING = re.compile(r"<(title|speaker|table)\b[^>]*(?<!/)>.*?</\1>", re.DOTALL)
SWORD_BREAK = re.compile(r"<(?:div|chapter|lg|lb|list|item|/item|p|/p|title|table|/table)\b[^>]*>")
BIBLE_REFERENCE = re.compile(r"\b(?:[1-3] ?)?[A-Z][a-z]{1,12}\.? \d+:\d+(?:\s?[-–,]\s?\d+(?::\d+)?)*")


def sword_entries(index: Path) -> Iterator[str]:
    """The entries (verses, commentary notes) of one testament of a compressed SWORD module, in canonical order,
    each entry once (a commentary links a range of verses to one note).

    index (Path): the testament's verse index, ``ot.bzv``/``nt.bzv`` (zText, zCom: 10-byte records) or
        ``ot.czv``/``nt.czv`` (zCom4: 12-byte records), next to its block index (``.bzs``/``.czs``) and its
        zlib-compressed blocks (``.bzz``/``.czz``).
    YIELDS (str): the OSIS markup of each entry.
    """
    record = 10 if index.suffix == ".bzv" else 12
    verses = index.read_bytes()
    blocks_index = index.with_suffix(index.suffix[:3] + "s").read_bytes()
    data = index.with_suffix(index.suffix[:3] + "z").read_bytes()
    blocks: Dict[int, bytes] = {}
    seen: Set[tuple] = set()
    for start in range(0, len(verses) - record + 1, record):
        if record == 10:
            block, offset, size = struct.unpack("<IIH", verses[start:start + 10])
        else:
            block, offset, size = struct.unpack("<III", verses[start:start + 12])
        if size == 0 or (block, offset) in seen or 12 * block + 12 > len(blocks_index):
            continue
        seen.add((block, offset))
        if block not in blocks:
            where, length, _ = struct.unpack("<III", blocks_index[12 * block:12 * block + 12])
            blocks[block] = zlib.decompress(data[where:where + length])
        yield blocks[block][offset:offset + size].decode("utf-8", errors="replace")


def sword_paragraphs(entries: Iterable[str], running: bool) -> Iterator[str]:
    """The prose paragraphs of SWORD entries in OSIS markup: notes, headings, variant readings, speakers, tables and
    cross-references dropped with their text, Bible references in the text (``1Jo 5:20``, ``Gen. 1:26``) removed
    with the punctuation they leave behind, a commentary's leading verse labels (``Verses 3-5``, ``Ver. 52.``)
    removed, other markup stripped.

    entries (Iterable[str]): the entries (`sword_entries`).
    running (bool): a Bible, whose verses run on into one another (paragraphs end only where the markup breaks
        them); otherwise (a commentary) every entry also ends a paragraph.
    YIELDS (str): paragraph texts, whitespace collapsed.
    """
    text = (" " if running else "\x00").join(entries)
    text = SWORD_DROP.sub(" ", text)
    text = SWORD_HEADING.sub("\x00", text)
    text = SWORD_BREAK.sub("\x00", text)
    text = html.unescape(re.sub(r"<[^<>]*>", "", text))
    for paragraph in text.split("\x00"):
        paragraph = BIBLE_REFERENCE.sub(" ", paragraph)
        # a pointer whose link text went with its reference: See Scofield "<reference>...</reference>"
        paragraph = re.sub(r'\bSee Scofield\s*"\s*"', " ", paragraph)
        paragraph = re.sub(r"\b(cf)\.\.", r"\1.", paragraph, flags=re.IGNORECASE)
        paragraph = re.sub(r"\(\s*(?:(?:see|cf|comp|ver|verses?)\.?)?[\s,;:.]*\)", " ", paragraph, flags=re.IGNORECASE)
        paragraph = re.sub(r"\s+([,;:.!?])", r"\1", " ".join(paragraph.split()))
        paragraph = re.sub(r"([,;:])(?:\s*[,;:])+", r"\1", paragraph)
        paragraph = re.sub(r"[,;:]\s*([.!?])", r"\1", paragraph)
        paragraph = re.sub(r"^(?:[\s.,;:]|(?:Verses?|Ver\.)\s\d+(?:\s?[-–,]\s?\d+)*\.?)+", "", paragraph)
        paragraph = paragraph.strip(" ,;:")
        if paragraph:
            yield paragraph


WML_KEYS = ("message", "female_message", "male_message", "story", "description", "text", "help_topic_text",
            "help_text", "special_note", "note", "summary")
WML_STRING = re.compile(r"\b(" + "|".join(WML_KEYS) + r")\s*=\s*_\s*\"((?:[^\"]|\"\")*)\""
                        r"((?:\s*\+\s*_?\s*\"(?:[^\"]|\"\")*\")*)")


def wml_paragraphs(text: str) -> Iterator[str]:
    """The translatable story, dialogue, description and help strings of a Wesnoth WML file (``message= _ "..."``,
    ``story=``, ``description=`` and others, with ``+`` continuations), comments and preprocessor lines left out,
    Pango and help markup stripped, and paragraphs holding a ``$variable`` or a ``{MACRO}`` dropped.

    text (str): the .cfg file.
    YIELDS (str): one text per paragraph (blank-line separated) of each string, whitespace collapsed.
    """
    text = re.sub(r"(?m)^\s*#.*$", "", text)
    for match in WML_STRING.finditer(text):
        value = match.group(2) + "".join(re.findall(r"\"((?:[^\"]|\"\")*)\"", match.group(3)))
        value = value.replace('""', '"')
        value = re.sub(r"<(ref|format)>.*?</\1>", lambda m: re.sub(r"^.*?text='([^']*)'.*$", r"\1", m.group(0),
                                                                  flags=re.DOTALL), value, flags=re.DOTALL)
        value = re.sub(r"<header>.*?</header>|<img>.*?</img>|<jump>.*?</jump>", "\n", value, flags=re.DOTALL)
        value = html.unescape(re.sub(r"<[^<>]*>", "", value))
        for paragraph in re.split(r"\n\s*\n", value):
            if paragraph.strip() and not re.search(r"[${}]|^\s*&", paragraph):
                yield " ".join(paragraph.split())


def crawl_paragraphs(text: str) -> Iterator[str]:
    """The paragraphs of a Dungeon Crawl description database file (entries between ``%%%%`` lines, each a key line
    and its text): comments, keys, Lua blocks (``{{ }}``), ``<key>`` inclusions, quotation attributions (``-Author``)
    and lines with ``@placeholders@`` dropped, ``_italics_`` underscores removed.

    text (str): the .txt file.
    YIELDS (str): paragraph texts, lines joined.
    """
    for entry in re.split(r"(?m)^%%%%\s*$", text):
        entry = re.sub(r"\{\{.*?\}\}", "", entry, flags=re.DOTALL)
        rows = [row for row in entry.split("\n") if not row.startswith("#")]
        while rows and not rows[0].strip():
            rows = rows[1:]
        for block in re.split(r"\n\s*\n", "\n".join(rows[1:])):
            lines = [row for row in block.split("\n")
                     if row.strip() and not re.match(r"\s*-\s*\S", row) and "@" not in row and "$" not in row]
            paragraph = " ".join(re.sub(r"<[^<>]*>", " ", " ".join(lines)).split())
            paragraph = re.sub(r"(?<!\w)_(\S(?:.*?\S)?)_(?!\w)", r"\1", paragraph)
            if paragraph:
                yield paragraph


FREECIV_STRING = r'(?:_\(\s*)?"((?:[^"\\]|\\.)*)"\s*\)?'


def freeciv_paragraphs(text: str) -> Iterator[str]:
    """The help texts of a Freeciv data file (``text``, ``helptext`` and nations' ``legend`` values: one string or a
    comma-separated list of them, ``_()`` marks and backslash continuations resolved), comments left out, help
    markup (``[b]``, ``[link]``) and translator qualifiers (``?help:``) stripped, and paragraphs holding a
    ``%`` placeholder or a generated table (``$``) dropped.

    text (str): helpdata.txt or a .ruleset file.
    YIELDS (str): one text per paragraph (string, or line of a string).
    """
    text = re.sub(r"(?m)^\s*;.*$", "", text)
    values = r"^\s*(?:text|helptext|legend)\s*=\s*((?:" + FREECIV_STRING + r"\s*,?\s*)+)"
    for match in re.finditer(values, text, flags=re.MULTILINE | re.DOTALL):
        for value in re.findall(FREECIV_STRING, match.group(1), flags=re.DOTALL):
            value = re.sub(r"\\\n", "", value).replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
            value = re.sub(r"^\?[\w ]+:", "", value)
            value = re.sub(r"\[/?[a-z]+(?:\s[^\]]*)?\]", "", value)
            for paragraph in re.split(r"\n\s*\n|\n(?=\s*[-*] )", value):
                if paragraph.strip() and not re.search(r"%|^\s*\$", paragraph):
                    yield " ".join(paragraph.split()).lstrip("-* ")


def fortune_paragraphs(text: str) -> Iterator[str]:
    """The cookies of a fortune file (``%`` separated), attribution lines (``-- Author``) removed.

    text (str): the fortune file.
    YIELDS (str): one text per cookie, lines joined.
    """
    for cookie in re.split(r"\n%\n", text):
        rows = [row for row in cookie.split("\n") if row.strip() and not row.strip().startswith("--")]
        if rows:
            yield " ".join(" ".join(rows).split())


# ----------------------------------------------------------------------------------------------
# Cleaning, normalising and hashing sentences

SENTENCE_END = {".", "!", "?", '"', "'", ")", "”", "’", "…"}
CODE_CHARS = set("{}[]<>=;$#@\\|^~`_*/%&")


def is_prose(tokens: List[str]) -> bool:
    """Whether a tokenized sentence reads as English prose: 4 to 120 tokens, at least half of them words, at least
    one English function word, few code characters, no very long token, and it ends like a sentence.

    tokens (List[str]): the sentence's tokens.
    RETURNS (bool): keep it.
    """
    if not 4 <= len(tokens) <= 120:
        return False
    if tokens[-1] not in SENTENCE_END or not (tokens[0][:1].isalpha() or tokens[0][:1] in "\"'“‘("):
        return False
    words = sum(1 for t in tokens if t.replace("-", "").replace("'", "").isalpha())
    if words < 0.6 * len(tokens) or words < 3:
        return False
    if not any(t.lower() in STOP_WORDS for t in tokens):
        return False
    text = "".join(tokens)
    if sum(c in CODE_CHARS for c in text) > 0.05 * len(text) or sum(c.isdigit() for c in text) > 0.2 * len(text):
        return False
    return all(len(t) <= 40 for t in tokens)


def normalise(tokens: Iterable[str]) -> str:
    """The key two sentences share when they are the same text: lower-cased, letters and digits only.

    tokens (Iterable[str]): a sentence's tokens (any tokenization).
    RETURNS (str): the normalised text.
    """
    return re.sub(r"[\W_]+", "", " ".join(tokens).lower())


def sentence_hash(tokens: Iterable[str]) -> bytes:
    """An 8-byte hash of the normalised sentence (`normalise`).

    tokens (Iterable[str]): a sentence's tokens.
    RETURNS (bytes): the hash.
    """
    return hashlib.blake2b(normalise(tokens).encode("utf-8"), digest_size=8).digest()


class Filter:
    """Exact deduplication across sources and removal of evaluation-set sentences, with counts.

    evaluation (Dict[str, Set[bytes]]): each evaluation set's sentence hashes.
    """

    def __init__(self, evaluation: Dict[str, Set[bytes]]) -> None:
        self.evaluation = evaluation
        self.seen: Set[bytes] = set()

    def apply(self, sentences: Iterable[List[str]]) -> tuple:
        """Keep each sentence the first time it is met and only when no evaluation set holds it.

        sentences (Iterable[List[str]]): one source's sentences.
        RETURNS (tuple): (kept sentences, duplicates dropped, Counter of overlaps per evaluation set).
        """
        kept: List[List[str]] = []
        duplicates = 0
        overlap: Counter = Counter()
        for tokens in sentences:
            key = sentence_hash(tokens)
            if key in self.seen:
                duplicates += 1
                continue
            self.seen.add(key)
            found = [name for name, hashes in self.evaluation.items() if key in hashes]
            if found:
                overlap.update(found)
                continue
            kept.append(tokens)
        return kept, duplicates, overlap


# ----------------------------------------------------------------------------------------------
# Evaluation sets


def evaluation_hashes(nlp, datasets: Path) -> Dict[str, Set[bytes]]:
    """The sentence hashes of every evaluation set: raw texts whole and as spaCy splits them, pre-tokenized
    sentences as given.

    nlp: the blank English pipeline with a sentencizer.
    datasets (Path): the datasets folder.
    RETURNS (Dict[str, Set[bytes]]): hashes per evaluation set.
    """

    def raw(texts: List[str]) -> Set[bytes]:
        hashes = {sentence_hash(t.split()) for t in texts}
        hashes |= {sentence_hash(s) for s in prepare_corpus.spacy_sentences(nlp, iter(texts), split=True)}
        return hashes

    def tokenized(sentences: Iterable[List[str]]) -> Set[bytes]:
        hashes: Set[bytes] = set()
        for tokens in sentences:
            hashes.add(sentence_hash(tokens))
            hashes |= {sentence_hash(piece.split()) for piece in re.split(r"(?<= [.!?]) ", " ".join(tokens))}
        return hashes

    ewt = datasets / "ud_english_ewt"
    sets = {
        "EWT dev": raw(prepare_corpus.ewt_texts(ewt / "en_ewt-ud-dev.conllu")),
        "EWT test": raw(prepare_corpus.ewt_texts(ewt / "en_ewt-ud-test.conllu")),
        "UD English PUD": raw(prepare_corpus.ewt_texts(datasets / "ud_english_pud" / "en_pud-ud-test.conllu")),
    }
    for split in ("testa", "testb"):
        sets[f"CoNLL-2003 {split}"] = tokenized(conll2003_sentences(datasets / "conll2003" / f"eng.{split}"))
    sets["WNUT17 test"] = tokenized(prepare_corpus.conll_tokens(datasets / "wnut17" / "emerging.test.annotated"))
    wic: List[str] = []
    for split in ("train", "dev", "test"):
        for line in (datasets / "wic" / split / f"{split}.data.txt").read_text(encoding="utf-8").splitlines():
            fields = line.split("\t")
            if len(fields) >= 5:
                wic += [fields[3], fields[4]]
    sets["WiC"] = raw(wic)
    sets["Senseval-2"] = tokenized(senseval_contexts(datasets / "senseval2_nltk" / "senseval.zip"))
    sets["WikiText-2 test"] = tokenized(wikitext_lines(datasets / "lm_wikitext2" / "test.txt"))
    return sets


def conll2003_sentences(path: Path) -> Iterator[List[str]]:
    """The sentences of a CoNLL-2003 file (token POS chunk tag, space separated; -DOCSTART- left out)."""
    tokens: List[str] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.strip() and not line.startswith("-DOCSTART-"):
            tokens.append(line.split()[0])
        elif tokens:
            yield tokens
            tokens = []
    if tokens:
        yield tokens


def senseval_contexts(zip_path: Path) -> Iterator[List[str]]:
    """The words of each Senseval lexical-sample context in NLTK's senseval.zip."""
    with zipfile.ZipFile(zip_path) as archive:
        for name in sorted(n for n in archive.namelist() if n.endswith(".pos")):
            text = archive.read(name).decode("utf-8", errors="replace")
            for context in re.findall(r"<context>(.*?)</context>", text, flags=re.DOTALL):
                words = [html.unescape(w) for w in re.findall(r"<wf[^>]*>([^<]*)</wf>", context)]
                if words:
                    yield words


def wikitext_lines(path: Path) -> Iterator[List[str]]:
    """Every WikiText paragraph line (headings left out), ``@-@``-style joins restored, ``<unk>`` kept."""
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("="):
            yield line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".").split()


# ----------------------------------------------------------------------------------------------
# Reading the sources


def installed_files(packages: List[str], pattern: str) -> List[Path]:
    """The installed files of Debian packages whose path matches a pattern.

    packages (List[str]): package names.
    pattern (str): a regular expression searched in each path.
    RETURNS (List[Path]): the matching files, sorted.
    RAISES SystemExit: a package is not installed (naming the apt-get command).
    """
    files: List[Path] = []
    for package in packages:
        listing = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True)
        if listing.returncode != 0:
            raise SystemExit(f"Debian package {package} is not installed: apt-get install {package}")
        files += [Path(p) for p in listing.stdout.splitlines() if re.search(pattern, p) and Path(p).is_file()]
    return sorted(set(files))


def package_version(package: str) -> Optional[str]:
    """The installed version of a Debian package (None when dpkg does not know it)."""
    result = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True)
    if result.returncode != 0:
        return None
    return result.stdout.strip() or None


def read_text(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix in (".gz", ".dz"):
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def source_paragraphs(source: dict, files: List[Path]) -> Iterator[str]:
    """The paragraphs of one Debian source's files, by its reader."""
    reader = source["reader"]
    for path in files:
        if reader == "html":
            yield from html_paragraphs(read_text(path))
        elif reader == "info":
            yield from info_paragraphs(read_text(path))
        elif reader == "pod":
            yield from pod_paragraphs(read_text(path))
        elif reader == "fortune":
            yield from fortune_paragraphs(read_text(path))
        elif reader in ("sword-bible", "sword-commentary"):
            yield from sword_paragraphs(sword_entries(path), running=reader == "sword-bible")
        elif reader == "wml":
            yield from wml_paragraphs(read_text(path))
        elif reader == "crawl":
            yield from crawl_paragraphs(read_text(path))
        elif reader == "freeciv":
            yield from freeciv_paragraphs(read_text(path))
        elif reader == "wordnet":
            for line in read_text(path).splitlines():
                yield from wordnet_paragraphs(line)
        elif reader == "dictd":
            index = path.with_name(path.name.replace(".dict.dz", ".index"))
            for headword, entry in dictd_entries(read_text(path), index.read_text(encoding="utf-8", errors="replace")):
                yield from dictd_paragraphs(headword, entry)
        else:
            raise ValueError(f"unknown reader {reader}")


def prose_sentences(nlp, paragraphs: Iterable[str]) -> Iterator[List[str]]:
    """spaCy's sentences of the paragraphs (prepare_corpus.spacy_sentences) that read as prose (`is_prose`)."""
    texts = (p for p in paragraphs if len(p) >= 20)
    for tokens in prepare_corpus.spacy_sentences(nlp, texts, split=True):
        if is_prose(tokens):
            yield tokens


def existing_sources(nlp, datasets: Path, kjv: Path) -> Dict[str, List[List[str]]]:
    """The sentences of prepare_corpus.py's --all-open corpus by source, and the ATIS train text."""
    args = argparse.Namespace(datasets=datasets, all_open=True, kjv=kjv)
    sources = prepare_corpus.pretraining_sources(nlp, args, random.Random(0), None)
    atis = prepare_corpus.ewt_texts(datasets / "ud_english_atis" / "en_atis-ud-train.conllu")
    sources["ATIS train"] = list(prepare_corpus.spacy_sentences(nlp, iter(atis), split=False))
    return sources


def kjv_dump(folder: Path) -> Path:
    """`bible -l100000 Gen1:1-Rev22:21` (Debian's bible-kjv) written to folder/kjv.txt."""
    try:
        result = subprocess.run(["bible", "-l100000", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit("the King James Bible needs Debian's bible-kjv: apt-get install bible-kjv")
    path = folder / "kjv.txt"
    path.write_text(result.stdout, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------------------------


def oov_rate(sentences: Iterable[List[str]], vocab: Set[str]) -> float:
    """The share of tokens not in the vocabulary (exact match)."""
    total = missing = 0
    for tokens in sentences:
        total += len(tokens)
        missing += sum(1 for t in tokens if t not in vocab)
    return round(missing / total, 5) if total else 0.0


ATTRIBUTION = """# Attribution and licences of this corpus

Built by `{command}` (spacy-elmo): text taken from the sources below, markup, code, tables and
headings removed, sentences split and tokenized with spaCy's rule-based English tokenizer and
sentencizer, sentences that do not read as English prose left out, exact duplicates removed and
every sentence also found in an evaluation set (EWT dev and test, UD English PUD, CoNLL-2003
testa and testb, WNUT17 test, WiC, Senseval-2, WikiText-2 test) removed; nothing else changed.
1% of the sentences are held out as `pretrain/dev.txt`.

Because of the share-alike sources (CC BY-SA, GPL, GFDL) the corpus, and what is trained on it,
is shared under those terms.

{sources}"""


def main() -> None:
    args = parse_args()
    mark_start("python -m lab.corpus.wide_corpus " + " ".join(portable_args(sys.argv[1:])))
    start = time.time()
    rng = random.Random(args.seed)
    (args.output / "READY").unlink(missing_ok=True)
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.max_length = 10_000_000
    selected = [s for s in DEBIAN_SOURCES if not args.only or s["name"] in args.only]
    files = {s["name"]: installed_files(s["packages"], s["pattern"]) for s in selected}  # fail before the long work
    evaluation = evaluation_hashes(nlp, args.datasets)
    print(f"evaluation sets: " + ", ".join(f"{k} {len(v)}" for k, v in evaluation.items()), flush=True)
    filter_ = Filter(evaluation)
    stats: Dict[str, dict] = {}
    lines: List[str] = []
    kept_by_source: Dict[str, List[str]] = {}

    def add(name: str, kind: str, package: str, version, licence: str, sentences: Iterable[List[str]]) -> None:
        kept, duplicates, overlap = filter_.apply(sentences)
        text = [" ".join(s) for s in kept]
        kept_by_source[name] = text
        lines.extend(text)
        stats[name] = {"kind": kind, "package": package, "version": version, "licence": licence,
                       "sentences": len(kept), "tokens": sum(map(len, kept)), "duplicates_removed": duplicates,
                       "evaluation_overlap_removed": dict(sorted(overlap.items()))}
        print(f"{name}: {len(kept)} sentences, {stats[name]['tokens']} tokens, {duplicates} duplicates, "
              f"overlap {dict(overlap)} ({time.time() - start:.0f} s)", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        kjv = kjv_dump(Path(tmp))
        for name, sentences in existing_sources(nlp, args.datasets, kjv).items():
            folder, kind, licence, _ = DATASET_SOURCES[name]
            package = "bible-kjv" if folder == "bible-kjv" else f"datasets/{folder}"
            version = package_version("bible-kjv") if folder == "bible-kjv" else None
            add(name, kind, package, version, licence, sentences)
    for source in selected:
        paragraphs = source_paragraphs(source, files[source["name"]])
        versions = ", ".join(f"{p} {package_version(p)}" for p in source["packages"])
        add(source["name"], source["kind"], " + ".join(source["packages"]), versions, source["licence"],
            prose_sentences(nlp, paragraphs))

    rng.shuffle(lines)
    n_dev = max(1, int(len(lines) * args.dev_fraction))
    pretrain = args.output / "pretrain"
    prepare_corpus.write_lines(pretrain / "dev.txt", [l.split() for l in lines[:n_dev]])
    train = lines[n_dev:]
    shards = max(1, min(args.shards, len(train)))
    for k in range(shards):
        path = pretrain / "train" / f"train-{k:02d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(l + "\n" for l in train[k::shards]), encoding="utf-8")
    total_tokens = sum(s["tokens"] for s in stats.values())
    (args.output / "READY").write_text(f"{total_tokens}\n", encoding="utf-8")

    vocab = set()
    if args.vocab is not None:
        vocab = {line.strip() for line in args.vocab.read_text(encoding="utf-8").splitlines() if line.strip()}
        for name, text in kept_by_source.items():
            stats[name]["oov_rate"] = oov_rate((l.split() for l in text), vocab)
    overlap_total: Counter = Counter()
    for s in stats.values():
        overlap_total.update(s["evaluation_overlap_removed"])
    by_kind: Dict[str, int] = {}
    for s in stats.values():
        by_kind[s["kind"]] = by_kind.get(s["kind"], 0) + s["tokens"]
    command = "python -m lab.corpus.wide_corpus " + " ".join(portable_args(sys.argv[1:]))
    record = {
        "command": command,
        "tokenizer": f"spacy {spacy.__version__} blank('en') + sentencizer",
        "sources": stats,
        "total": {
            "sentences": len(lines), "tokens": total_tokens, "train_sentences": len(train), "dev_sentences": n_dev,
            "train_tokens": sum(len(l.split()) for l in train), "shards": shards,
            "duplicates_removed": sum(s["duplicates_removed"] for s in stats.values()),
            "evaluation_overlap_removed": dict(sorted(overlap_total.items())),
            "evaluation_set_sentences_hashed": {k: len(v) for k, v in evaluation.items()},
        },
        "new_sources_tokens": sum(s["tokens"] for n, s in stats.items() if n not in DATASET_SOURCES),
        "tokens_by_kind": by_kind,
        "general_share": round(by_kind.get("general", 0) / total_tokens, 4) if total_tokens else 0.0,
        "wall_time_s": round(time.time() - start, 1),
    }
    if args.vocab is not None:
        record["total"]["oov_rate"] = oov_rate((l.split() for l in lines), vocab)
        record["oov_vocab"] = {"file": args.vocab.name, "entries": len(vocab), "match": "exact, case-sensitive"}
    folders = sorted({f for f, _, _, _ in DATASET_SOURCES.values() if f != "bible-kjv"} | set(EVALUATION_FOLDERS))
    record["provenance"] = provenance(
        command, model=None, model_note="builds a corpus; no biLM runs",
        data=data_record([args.datasets / f for f in folders]),
        data_note="and the files of the Debian packages named with their versions under sources",
    )
    record["corpus_sha256"] = data_record([args.output / "pretrain"])
    (args.output / "corpus-stats.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    attribution = {**{n: (l, a) for n, (_, _, l, a) in DATASET_SOURCES.items()},
                   **{s["name"]: (s["licence"], s["attribution"]) for s in DEBIAN_SOURCES}}
    entries = "\n".join(
        f"- **{name}** ({stats[name]['package']}{', ' + stats[name]['version'] if stats[name]['version'] else ''}): "
        f"{attribution[name][1]} Licence: {attribution[name][0]}. {stats[name]['sentences']:,} sentences, "
        f"{stats[name]['tokens']:,} tokens."
        for name in stats)
    (args.output / "ATTRIBUTION.md").write_text(ATTRIBUTION.format(command=command, sources=entries + "\n"), encoding="utf-8")
    print(f"{args.output}: {len(train)} train / {n_dev} dev sentences, {total_tokens} tokens, general share "
          f"{record['general_share']} ({time.time() - start:.0f} s)")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", type=Path, required=True, help="the datasets folder (project.yml's vars.datasets)")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--vocab", type=Path, default=None, help="a vocab.txt to measure the out-of-vocabulary rate under")
    parser.add_argument("--only", nargs="*", default=None, help="only these Debian sources (by name; for a quick look)")
    parser.add_argument("--shards", type=int, default=8, help="pretraining files")
    parser.add_argument("--dev-fraction", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


if __name__ == "__main__":
    main()
