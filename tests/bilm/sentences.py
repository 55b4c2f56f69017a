"""Sentences with the awkward cases (long, non-ASCII, empty, repeated) and a no-grad run of a biLM over them."""
import torch

from spacy_elmo.bilm import batch_char_ids

SENTENCES = [
    ["The", "bank", "raised", "its", "rates", "."],
    ["We", "sat", "on", "the", "river", "bank", "all", "afternoon", "."],
    ["a" * 60, "naïve", "日本語", "x"],
    [],
    ["the", "the", "the"],
]


def layers(bilm, sentences=SENTENCES):
    ids, lengths = batch_char_ids(sentences)
    with torch.no_grad():
        return bilm(torch.from_numpy(ids), torch.from_numpy(lengths))
