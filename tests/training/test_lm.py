"""The training model (training/lm.py): a seeded run repeats bit for bit at two threads."""
import hashlib

import torch

from spacy_elmo.bilm.softmax import WordSoftmax
from spacy_elmo.training.lm import LanguageModel

from ..conftest import random_bilm


def _seeded_run(sampled: bool) -> str:
    torch.manual_seed(0)
    bilm = random_bilm(seed=1, dim=64, projection_dim=64)  # rows enough to be split between threads
    softmax = WordSoftmax(60, bilm.config.projection_dim, n_samples=16 if sampled else 0)
    lm = LanguageModel(bilm, softmax, dropout=0.1)
    lm.train()
    optimizer = torch.optim.Adam(lm.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(2)
    vocab = torch.randint(1, 200, (8, bilm.config.max_characters_per_token), generator=gen)  # 8 distinct tokens
    torch.manual_seed(1234)
    for _ in range(3):
        words = torch.randint(0, 8, (32, 40), generator=gen)  # tokens and targets repeat within a batch
        ids, targets = vocab[words], torch.randint(0, 6, (32, 40), generator=gen)
        out = lm(ids, torch.tensor([40] * 16 + [30] * 16), targets, targets)
        optimizer.zero_grad()
        (out["forward_nll"] + out["backward_nll"]).backward()
        optimizer.step()
    digest = hashlib.sha256()
    for p in lm.parameters():
        digest.update(p.detach().numpy().tobytes())
    return digest.hexdigest()


def test_a_seeded_run_repeats_bit_for_bit_at_two_threads():
    torch.set_num_threads(2)
    for sampled in (False, True):
        runs = {_seeded_run(sampled) for _ in range(3)}
        assert len(runs) == 1, f"{len(runs)} different final weights over 3 seeded runs (sampled softmax: {sampled})"
