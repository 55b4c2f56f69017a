"""The general English texts the package ships (``spacy_elmo/training/general/``) for ``finetune``:
a held-out text it scores before and after fine-tuning, to show what the model kept of general
English, and a text it replays among the domain's while it trains, so that it keeps it.

- ``en-ewt-test-half.txt``, held out: every second sentence of UD English EWT test (CC BY-SA 4.0),
  tokenized as the campaign's ``eval/ewt-test.txt`` (``prepare_corpus.py``: spaCy's rule-based
  English tokenizer); held out from every stage that trained the shipped model, as its model card
  says; every second sentence keeps all of the test set's documents and genres at half the
  scoring time.
- ``en-ewt-train.txt``, replayed: every sentence of UD English EWT train, tokenized the same way:
  the text the shipped model was last fine-tuned on (its model card), none of it in the test split.

    python -m lab.corpus.general_text --datasets assets/datasets
"""
import argparse
import hashlib
from pathlib import Path

import spacy

from .prepare_corpus import ewt_texts, spacy_sentences

OUTPUT = Path(__file__).resolve().parents[2] / "spacy_elmo" / "training" / "general"
NAME = "en-ewt-test-half.txt"
REPLAY_NAME = "en-ewt-train.txt"
ATTRIBUTION = """# The general English texts

- `{name}`: every second sentence ({sentences} sentences, {tokens} tokens) of the test split of
  UD_English-EWT. SHA-256 `{sha}`. `finetune` scores it before and after fine-tuning an English
  model (`[finetune] general`): the shipped model never trained on it (its model card: EWT test is
  held out from every stage).
- `{replay_name}`: every sentence ({replay_sentences} sentences, {replay_tokens} tokens) of the train
  split of UD_English-EWT. SHA-256 `{replay_sha}`. `finetune` replays it among the domain's text
  (`[finetune] replay`): the shipped model was last fine-tuned on it.

Both are the raw sentence text (the `# text` comments) of the Universal Dependencies English Web
Treebank (UD_English-EWT), tokenized with spaCy's rule-based English tokenizer, one sentence a
line. Creative Commons Attribution-ShareAlike 4.0 International (CC BY-SA 4.0),
https://github.com/UniversalDependencies/UD_English-EWT; the English Web Treebank (LDC2012T13)
text by Google Inc. / LDC, UD annotation by the UD contributors (Silveira et al. 2014). These files
are under CC BY-SA 4.0 as well. Built by `python -m lab.corpus.general_text --datasets DATASETS`
(spacy-elmo).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", type=Path, required=True, help="the data folder (holds ud_english_ewt/)")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    nlp = spacy.blank("en")
    args.output.mkdir(parents=True, exist_ok=True)
    facts = {}
    for key, name, split, step in (("", NAME, "test", 2), ("replay_", REPLAY_NAME, "train", 1)):
        lines = ewt_texts(args.datasets / "ud_english_ewt" / f"en_ewt-ud-{split}.conllu")[::step]
        sentences = list(spacy_sentences(nlp, iter(lines), split=False))
        data = "".join(" ".join(s) + "\n" for s in sentences).encode("utf-8")
        (args.output / name).write_bytes(data)
        facts.update({f"{key}name": name, f"{key}sentences": f"{len(sentences):,}",
                      f"{key}tokens": f"{sum(map(len, sentences)):,}", f"{key}sha": hashlib.sha256(data).hexdigest()})
        print(f"{args.output / name}: {len(sentences)} sentences, {sum(map(len, sentences))} tokens")
    (args.output / "ATTRIBUTION.md").write_text(ATTRIBUTION.format(**facts), encoding="utf-8")


if __name__ == "__main__":
    main()
