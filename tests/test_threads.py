"""The old process-wide callback (``threads.py``)."""
import logging

import pytest
import torch
from spacy.language import Language
from spacy.util import registry


def test_the_old_process_wide_callback_says_when_it_changes_the_count(caplog, process_threads):
    callback = registry.callbacks.get("spacy-elmo.set_torch_threads.v1")
    with caplog.at_level(logging.WARNING, logger="spacy_elmo.threads"):
        assert callback(threads=3)(Language) is Language
        assert not caplog.records  # no change, nothing said
        callback(threads=1)(Language)
        assert torch.get_num_threads() == 1
        assert "from 3 to 1" in caplog.text and "before_creation = null" in caplog.text
        callback(threads=0)(Language)
        assert torch.get_num_threads() == 1  # 0 leaves the setting alone
    with pytest.raises(ValueError):
        callback(threads=-1)
