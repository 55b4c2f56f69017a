"""Pure PyTorch ELMo biLM: no spaCy or thinc imports below this package."""
from .batching import plan_batches
from .char_vocab import CharVocabulary
from .chars import batch_char_ids, sentence_char_ids, token_char_ids
from .config import BiLMConfig
from .model import BiLM, BiLMOutput, BiLMState
from .scalar_mix import ScalarMix
from .token_encoder import CharCNNEncoder
from .vector_setting import VectorSetting

__all__ = [
    "BiLM",
    "BiLMConfig",
    "BiLMOutput",
    "BiLMState",
    "CharCNNEncoder",
    "CharVocabulary",
    "ScalarMix",
    "VectorSetting",
    "batch_char_ids",
    "plan_batches",
    "sentence_char_ids",
    "token_char_ids",
]
