"""Language-model pretraining and domain fine-tuning of biLMs.

``pretrain(config, output)`` and ``finetune(config, output, model=...)`` run a whole
job from a config loaded with ``load_lm_config``; the parts (streaming corpora,
vocabulary, batches, the language model, the loop, checkpoints, perplexity,
torch.distributed) live in their own modules.
"""
from .config import LMConfig, load_lm_config
from .corpus import Corpus, CorpusStats
from .finetune import finetune
from .perplexity import Perplexity, evaluate_perplexity
from .pretrain import pretrain
from .vocab import Vocab

__all__ = [
    "Corpus",
    "CorpusStats",
    "LMConfig",
    "Perplexity",
    "Vocab",
    "evaluate_perplexity",
    "finetune",
    "load_lm_config",
    "pretrain",
]
