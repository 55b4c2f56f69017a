"""Layer probes: what each biLM layer knows (Peters et al. 2018, section 5.3), on frozen vectors.

``run_probe`` trains a linear classifier (UPOS, NER) or a cosine classifier (word sense, WiC) on
each layer alone, on their mean and on a learned scalar mix, beside majority-class and
word-identity baselines. Layer 0 is the char-CNN, which sees no context: the LSTM layers'
margin over it is what pretraining taught about context. ``neighbors`` retrieves a word's sense
neighbours, the corpus uses closest to its use in a query (the paper's table 4).
"""
from .result import ProbeResult, TaskResult
from .run import TrainingProbe, run_probe
from .task_data import DEFAULT_TASKS, TASKS

__all__ = ["DEFAULT_TASKS", "ProbeResult", "TASKS", "TaskResult", "TrainingProbe", "run_probe"]
