"""Command-line interface. Each command lives in its own module and registers on ``_app.app``."""
from ._app import app
from . import dump, neighbors  # noqa: F401  (registers the commands)
from . import convert  # noqa: F401
from . import evaluate, finetune, pretrain  # noqa: F401  (biLM training commands)
from . import probe  # noqa: F401
from . import download  # noqa: F401  (published models by name)
from . import kernels  # noqa: F401  (the compiled LSTM step)
from . import embed_corpus  # noqa: F401  (a corpus on Ray actors)
from . import substitutes  # noqa: F401  (the LM's own words at each position)
from . import change, senses, usages  # noqa: F401  (word usages, semantic change, induced senses)
from . import export  # noqa: F401  (ONNX and TorchScript files of the biLM)
from . import downstream  # noqa: F401  (components trained with and without ELMo)
from . import init_config  # noqa: F401  (the installed training configs, for a named biLM)
from . import vectors  # noqa: F401  (a model's default token vectors, chosen by WiC)

__all__ = ["app"]
