"""The bidirectional language model: token encoder + forward and backward LSTMP stacks."""
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from .batching import plan_batches
from .char_vocab import CharVocabulary
from .chars import batch_char_ids
from .config import BiLMConfig
from .lstm import LSTMPStack, State
from .token_encoder import CharCNNEncoder, take_rows
from .vector_setting import VectorSetting

# (forward states, backward states), one (h, c) per layer, rows in input order
BiLMState = Tuple[List[State], List[State]]


@dataclass
class TokenLayout:
    """Where a forward pass put its tokens, for a runner that computes less than the reference:
    the distinct tokens' encodings and, per position, which one sits there.

    distinct (Tensor): (U, projection_dim) encodings of the batch's distinct tokens.
    inverse (LongTensor): (N,) the distinct row of each valid position, in ``mask`` order.
    mask (BoolTensor): (B, T) the valid positions, rows in input order.
    order (LongTensor): (B,) the rows sorted by decreasing length, as the stacks see them.
    reverse (LongTensor): (B, T) the index that reverses each sorted row for the backward stack.
    """

    distinct: torch.Tensor
    inverse: torch.Tensor
    mask: torch.Tensor
    order: torch.Tensor
    reverse: torch.Tensor


@dataclass
class BiLMOutput:
    """layers (Tensor): (L+1, B, T, 2 * projection_dim), zero at padding positions.
    lengths (Tensor): (B,) number of positions of each row (boundaries included if the ids had them).
    state (BiLMState): the LSTM state each row ended in.
    """

    layers: torch.Tensor
    lengths: torch.Tensor
    state: BiLMState


class BiLM(nn.Module):
    """A character-level biLM (Peters et al. 2018) with freshly initialized weights.

    config (BiLMConfig): the architecture. Importers (``spacy_elmo.io``) fill in weights.
    char_vocab (Optional[CharVocabulary]): how tokens become ids when not as the published
        AllenNLP/bilm-tf models read them (UTF-8 bytes, ``chars.py``): a learned character
        vocabulary and optional word embedding (ELMoForManyLangs' models). ``batch_ids`` uses it.

    ``vector_setting`` (Optional[VectorSetting]): the model's default token vectors, where its
    directory stores them (``vectors.json``, ``io.vector_file``); None: the mean of the layers.
    """

    def __init__(self, config: BiLMConfig, *, char_vocab: Optional[CharVocabulary] = None) -> None:
        super().__init__()
        self.config = config
        self.char_vocab = char_vocab
        self.vector_setting: Optional[VectorSetting] = None
        self.token_encoder = CharCNNEncoder(config, char_vocab)
        stack_args = (
            config.projection_dim,
            config.dim,
            config.projection_dim,
            config.n_layers,
            config.cell_clip,
            config.proj_clip,
            config.use_skip_connections,
        )
        self.forward_lstm = LSTMPStack(*stack_args)
        self.backward_lstm = LSTMPStack(*stack_args)
        self.stateful = False
        self._carried: Optional[BiLMState] = None
        # The one runner slot: None runs the model as written here. ``spacy_elmo.fast.attach`` sets
        # a runner, which encodes the tokens (``encode_tokens(encoder, char_ids)``) and runs both
        # stacks (``run_stacks(forward, backward, inputs, batch_sizes, states, layout)``) with the
        # same results, faster; how is fast/'s business. Not saved with the weights.
        self.runner: Optional[Any] = None

    @property
    def device(self) -> torch.device:
        return self.token_encoder.char_embedding.weight.device

    def zero_state(self, batch: int) -> BiLMState:
        cfg = self.config
        weight = self.token_encoder.char_embedding.weight

        def zeros() -> List[State]:
            return [
                (weight.new_zeros(batch, cfg.projection_dim), weight.new_zeros(batch, cfg.dim))
                for _ in range(cfg.n_layers)
            ]

        return zeros(), zeros()

    @property
    def token_width(self) -> int:
        """The number of ids per token that ``forward`` reads (see ``batch_ids``)."""
        return self.config.max_characters_per_token + self.token_encoder.first_char

    def batch_ids(
        self, sentences: Sequence[Sequence[str]], *, boundaries: bool = True
    ) -> Tuple[np.ndarray, np.ndarray]:
        """The ids ``forward`` reads for a batch of token strings: the published byte ids
        (``chars.batch_char_ids``), or those of the model's learned vocabulary (``char_vocab``).

        boundaries (bool): add the sentence-boundary tokens around each sentence.
        RETURNS (Tuple[np.ndarray, np.ndarray]): ids (B, T, token_width), 0 for padding tokens,
            and lengths (B,).
        """
        max_chars = self.config.max_characters_per_token
        if self.char_vocab is not None:
            return self.char_vocab.batch_ids(sentences, max_chars, boundaries=boundaries)
        if self.config.n_characters < 261:
            raise ValueError(
                f"this biLM has {self.config.n_characters} characters and no character vocabulary: "
                "byte ids need 262 (give the vocabulary it was trained with as char_vocab)"
            )
        return batch_char_ids(sentences, max_chars, boundaries=boundaries)

    def reset_states(self) -> None:
        """Forget the state carried between calls in stateful mode."""
        self._carried = None

    def forward(
        self,
        char_ids: torch.Tensor,
        lengths: Optional[torch.Tensor] = None,
        initial_state: Optional[BiLMState] = None,
    ) -> BiLMOutput:
        """Run the biLM.

        char_ids (LongTensor): (B, T, token_width); each row's tokens left-aligned, 0 rows for
            padding. Sentence boundaries are whatever the ids contain (see ``batch_ids``).
        lengths (Optional[LongTensor]): (B,) tokens per row; derived from the padding if None.
        initial_state (Optional[BiLMState]): start state; zeros unless given, or, in stateful mode,
            the state the previous call left (as the original TensorFlow code ran).
        RETURNS (BiLMOutput): all L+1 layers.
        """
        batch, steps, width = char_ids.shape
        if width != self.token_width:
            raise ValueError(
                f"token ids of width {width}, but this biLM reads {self.token_width} per token: "
                "build them with BiLM.batch_ids"
            )
        if lengths is None:
            lengths = (char_ids > 0).any(dim=-1).sum(dim=-1)
        lengths = lengths.to(torch.long).cpu()
        if initial_state is None:
            initial_state = self._carried_state(batch) if self.stateful else self.zero_state(batch)

        mask = torch.arange(steps)[None, :] < lengths[:, None]
        mask_dev = mask.to(char_ids.device)
        if self.runner is None:
            distinct, inverse = self.token_encoder.encode_distinct(char_ids[mask_dev])
        else:
            distinct, inverse = self.runner.encode_tokens(self.token_encoder, char_ids[mask_dev])
        encoded_valid = take_rows(distinct, inverse)
        tokens = encoded_valid.new_zeros(batch, steps, self.config.projection_dim)
        tokens = tokens.masked_scatter(mask_dev[..., None], encoded_valid)
        order = torch.argsort(lengths, descending=True, stable=True)
        sorted_lengths = lengths[order]
        batch_sizes = _batch_sizes(sorted_lengths.numpy(), steps)
        order_dev = order.to(char_ids.device)
        sorted_tokens = tokens.index_select(0, order_dev)
        reverse = _reversal_index(sorted_lengths, steps).to(char_ids.device)

        fwd_state = [(h.index_select(0, order_dev), c.index_select(0, order_dev)) for h, c in initial_state[0]]
        bwd_state = [(h.index_select(0, order_dev), c.index_select(0, order_dev)) for h, c in initial_state[1]]
        inputs = (sorted_tokens, _gather_time(sorted_tokens, reverse))
        states = (fwd_state, bwd_state)
        if self.runner is None:
            fwd = self.forward_lstm(inputs[0], batch_sizes, fwd_state)
            bwd = self.backward_lstm(inputs[1], batch_sizes, bwd_state)
        else:
            layout = TokenLayout(distinct, inverse, mask_dev, order_dev, reverse)
            fwd, bwd = self.runner.run_stacks(self.forward_lstm, self.backward_lstm, inputs, batch_sizes, states, layout)
        (fwd_out, fwd_final), (bwd_out, bwd_final) = fwd, bwd
        bwd_out = [_gather_time(y, reverse) for y in bwd_out]

        unsort = torch.argsort(order_dev)
        layers = [torch.cat([tokens, tokens], dim=-1) * mask_dev[..., None].to(tokens.dtype)]
        layers += [torch.cat([f, b], dim=-1).index_select(0, unsort) for f, b in zip(fwd_out, bwd_out)]
        final: BiLMState = (
            [(h.index_select(0, unsort), c.index_select(0, unsort)) for h, c in fwd_final],
            [(h.index_select(0, unsort), c.index_select(0, unsort)) for h, c in bwd_final],
        )
        if self.stateful:
            self._store_state(final)
        return BiLMOutput(layers=torch.stack(layers), lengths=lengths, state=final)

    def _carried_state(self, batch: int) -> BiLMState:
        state = self.zero_state(batch)
        if self._carried is None:
            return state
        merged = []
        for zero_dir, carried_dir in zip(state, self._carried):
            rows = []
            for (h0, c0), (h1, c1) in zip(zero_dir, carried_dir):
                n = min(batch, h1.shape[0])
                rows.append((torch.cat([h1[:n], h0[n:]]), torch.cat([c1[:n], c0[n:]])))
            merged.append(rows)
        return merged[0], merged[1]

    def _store_state(self, final: BiLMState) -> None:
        # Rows of earlier, larger batches that this call did not use keep their state.
        previous = self._carried
        stored = []
        for d, direction in enumerate(final):
            rows = []
            for k, (h, c) in enumerate(direction):
                h, c = h.detach(), c.detach()
                if previous is not None and previous[d][k][0].shape[0] > h.shape[0]:
                    old_h, old_c = previous[d][k]
                    h = torch.cat([h, old_h[h.shape[0] :]])
                    c = torch.cat([c, old_c[c.shape[0] :]])
                rows.append((h, c))
            stored.append(rows)
        self._carried = (stored[0], stored[1])

    def embed(
        self,
        sentences: Sequence[Sequence[str]],
        *,
        batch_size: int = 64,
        max_batch_items: Optional[int] = None,
        boundaries: bool = False,
    ) -> List[np.ndarray]:
        """Contextual representations of pre-tokenized sentences.

        sentences (Sequence[Sequence[str]]): lists of token strings.
        batch_size (int): most sentences per forward pass.
        max_batch_items (Optional[int]): most padded positions per forward pass.
        boundaries (bool): keep the sentence-boundary positions (<S> and </S>) in the output.
        RETURNS (List[np.ndarray]): per sentence, in input order, float32 (L+1, n_tokens, 2 * projection_dim).
            In stateful mode sentences run in input order, batch_size at a time.
        """
        results: List[Optional[np.ndarray]] = [None] * len(sentences)
        lengths = [len(s) for s in sentences]
        if self.stateful:
            batches = [list(range(i, min(i + batch_size, len(sentences)))) for i in range(0, len(sentences), batch_size)]
        else:
            batches = plan_batches(lengths, batch_size=batch_size, max_batch_items=max_batch_items)
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                for batch in batches:
                    ids, lens = self.batch_ids([sentences[i] for i in batch])
                    out = self(torch.from_numpy(ids).to(self.device), torch.from_numpy(lens))
                    layers = out.layers.float().cpu().numpy()
                    for row, index in enumerate(batch):
                        n = int(lens[row])
                        span = slice(0, n) if boundaries else slice(1, n - 1)
                        results[index] = np.ascontiguousarray(layers[:, row, span])
        finally:
            self.train(was_training)
        return [r for r in results if r is not None]


def _batch_sizes(sorted_lengths: np.ndarray, steps: int) -> List[int]:
    return [int((sorted_lengths > t).sum()) for t in range(steps)]


def _reversal_index(lengths: torch.Tensor, steps: int) -> torch.Tensor:
    """(B, T) index that reverses each row's first ``length`` positions and leaves padding in place."""
    positions = torch.arange(steps)[None, :].expand(len(lengths), steps)
    reversed_positions = lengths[:, None] - 1 - positions
    return torch.where(positions < lengths[:, None], reversed_positions, positions)


def _gather_time(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return x.gather(1, index[..., None].expand(-1, -1, x.shape[-1]))
