"""The corpora: pretraining text, the bundled sample, labelled .spacy files and vocabulary checks."""
