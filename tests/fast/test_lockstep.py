"""Both directions in lockstep give what running them one after the other gives."""
import pytest
import torch

from spacy_elmo.bilm import batch_char_ids
from spacy_elmo.fast.lockstep import (
    gather_running,
    packed_positions,
    pair_directions,
    paired_weights,
    run_lockstep,
    unpair_directions,
)
from spacy_elmo.fast import compiled
from spacy_elmo.fast.dispatch import Runner
from spacy_elmo.fast.in_place import run_in_place
from spacy_elmo.fast.precision import FP32

from ..conftest import random_bilm

def run_directions(*args, **kwargs):
    """Both stacks as the optimized model's runner runs them (in lockstep where it can)."""
    return Runner(exact=False).run_stacks(*args, **kwargs)


SENTENCES = [["a", "river", "bank", "."], ["money", "in", "the", "bank", "today", "!"], ["x"], []]


def run(bilm):
    ids, lengths = batch_char_ids(SENTENCES)
    with torch.no_grad():
        return bilm(torch.from_numpy(ids), torch.from_numpy(lengths))


def stack_inputs(bilm, seed=0):
    generator = torch.Generator().manual_seed(seed)
    width = bilm.config.projection_dim
    inputs = tuple(torch.randn(3, 5, width, generator=generator) for _ in range(2))
    states = tuple(
        [(torch.randn(3, width, generator=generator), torch.randn(3, bilm.config.dim, generator=generator))] * 2
        for _ in range(2)
    )
    return inputs, [3, 3, 2, 2, 1], states


def test_lockstep_equals_one_direction_after_the_other():
    bilm = random_bilm(seed=11)
    inputs, batch_sizes, states = stack_inputs(bilm)
    with torch.no_grad():
        expected = (
            bilm.forward_lstm(inputs[0], batch_sizes, states[0]),
            bilm.backward_lstm(inputs[1], batch_sizes, states[1]),
        )
        pair_directions(bilm.forward_lstm, bilm.backward_lstm)
        assert paired_weights(bilm.forward_lstm.layers[1], bilm.backward_lstm.layers[1]) is not None
        got = run_directions(bilm.forward_lstm, bilm.backward_lstm, inputs, batch_sizes, states)
    for (exp_out, exp_final), (got_out, got_final) in zip(expected, got):
        for a, b in zip(exp_out, got_out):
            torch.testing.assert_close(b, a, atol=1e-6, rtol=0)
        for (h1, c1), (h2, c2) in zip(exp_final, got_final):
            torch.testing.assert_close(h2, h1, atol=1e-6, rtol=0)
            torch.testing.assert_close(c2, c1, atol=1e-6, rtol=0)
    # the initial states were not modified in place
    assert torch.equal(states[0][0][1], stack_inputs(bilm)[2][0][0][1])


# training paired weights works; autograd copies each gradient into their layout and says so
@pytest.mark.filterwarnings("ignore:grad and param do not obey the gradient layout contract")
def test_pairing_keeps_values_and_training_updates_the_shared_weights():
    plain, paired = random_bilm(seed=12), random_bilm(seed=12)
    pair_directions(paired.forward_lstm, paired.backward_lstm)
    for (name, a), (_, b) in zip(plain.state_dict().items(), paired.state_dict().items()):
        assert torch.equal(a, b), name
    torch.testing.assert_close(run(paired).layers, run(plain).layers, atol=1e-5, rtol=0)
    # a training step through the (autograd) path changes the shared tensors the lockstep path reads
    for model in (plain, paired):
        model.train()
        ids, lengths = batch_char_ids(SENTENCES[:2])
        model(torch.from_numpy(ids), torch.from_numpy(lengths)).layers.pow(2).sum().backward()
        torch.optim.SGD(model.parameters(), lr=0.01).step()
        model.eval()
    assert paired_weights(paired.forward_lstm.layers[0], paired.backward_lstm.layers[0]) is not None
    after = run(plain).layers
    assert not torch.allclose(after, run(random_bilm(seed=12)).layers, atol=1e-3)
    torch.testing.assert_close(run(paired).layers, after, atol=1e-5, rtol=1e-5)
    unpair_directions(paired.forward_lstm, paired.backward_lstm)
    assert paired_weights(paired.forward_lstm.layers[0], paired.backward_lstm.layers[0]) is None
    assert all(p.is_contiguous() for p in paired.parameters())
    # on an unpaired model it copies nothing (the component calls it before every training step)
    pointers = [p.data_ptr() for p in paired.parameters()]
    unpair_directions(paired.forward_lstm, paired.backward_lstm)
    assert [p.data_ptr() for p in paired.parameters()] == pointers


def test_hooks_and_autograd_run_the_directions_separately():
    bilm = random_bilm(seed=13)
    pair_directions(bilm.forward_lstm, bilm.backward_lstm)
    seen = []
    bilm.backward_lstm.layers[0].register_forward_pre_hook(lambda module, args: seen.append(args[0].shape))
    inputs, batch_sizes, states = stack_inputs(bilm)
    with torch.no_grad():
        run_directions(bilm.forward_lstm, bilm.backward_lstm, inputs, batch_sizes, states)
    assert seen == [inputs[1].shape]
    (fwd, _), (bwd, _) = run_directions(bilm.forward_lstm, bilm.backward_lstm, inputs, batch_sizes, states)
    assert fwd[-1].requires_grad and bwd[-1].requires_grad


def test_packed_positions_list_running_rows_timestep_after_timestep():
    rows, times = packed_positions([3, 3, 2, 1, 0], torch.device("cpu"))
    assert rows.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 0]
    assert times.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 3]
    rows, times = packed_positions([], torch.device("cpu"))
    assert rows.numel() == times.numel() == 0


def test_steps_read_a_packed_buffer_as_they_read_the_padded_one():
    """Bitwise: both layouts feed each step the same rows to the same products; only where the
    step reads its gate inputs from differs."""
    bilm = random_bilm(seed=15)
    pair_directions(bilm.forward_lstm, bilm.backward_lstm)
    pair = (bilm.forward_lstm.layers[0], bilm.backward_lstm.layers[0])
    weights = paired_weights(*pair)[1:]
    batch_sizes = [3, 3, 2, 1, 0]
    generator = torch.Generator().manual_seed(4)
    padded = torch.randn(2, 5, 3, weights[0].shape[-1], generator=generator)
    rows, times = packed_positions(batch_sizes, padded.device)
    packed = padded[:, times, rows]  # (2, 9, gates): each timestep's running rows, in order
    _, _, states = stack_inputs(bilm)
    states = [states[0][0], states[1][0]]
    with torch.no_grad():
        expected, _ = run_in_place(pair, padded, batch_sizes, states, weights)
        got, _ = run_in_place(pair, packed, batch_sizes, states, weights, packed=True)
    assert torch.equal(got, expected)


def test_first_layer_from_a_table_of_distinct_rows_equals_the_full_inputs():
    bilm = random_bilm(seed=14)
    pair_directions(bilm.forward_lstm, bilm.backward_lstm)
    generator = torch.Generator().manual_seed(3)
    table = torch.randn(4, bilm.config.projection_dim, generator=generator)
    # each direction reads the table in its own order, with repeats; the padded slot is never read
    slots = (torch.tensor([[0, 1, 1, 2, 3], [2, 2, 0, 3, 0]]), torch.tensor([[3, 2, 1, 1, 0], [3, 0, 2, 2, 0]]))
    batch_sizes = [2, 2, 2, 2, 1]
    inputs = (table[slots[0]], table[slots[1]])
    _, _, states = stack_inputs(bilm)
    states = tuple([(h[:2], c[:2]) for h, c in direction] for direction in states)
    with torch.no_grad():
        expected = run_directions(bilm.forward_lstm, bilm.backward_lstm, inputs, batch_sizes, states)
        # the table must be what is read: poison the positional inputs of the first layer
        poisoned = tuple(x.clone().fill_(1e3) for x in inputs)
        got = run_lockstep(
            bilm.forward_lstm, bilm.backward_lstm, poisoned, batch_sizes, states, FP32,
            compiled.usable(poisoned[0]), first_inputs=(table, slots),
        )
    for (exp_out, _), (got_out, _) in zip(expected, got):
        for a, b in zip(exp_out, got_out):
            torch.testing.assert_close(b, a, atol=1e-6, rtol=0)


@pytest.mark.parametrize("batch_sizes", [[3, 3, 2, 1, 0], [3, 3, 3, 3, 3], [1, 1, 1, 1, 1], [2, 0, 0, 0, 0]])
def test_gather_running_equals_indexing(batch_sizes):
    x = torch.arange(3 * 5 * 2, dtype=torch.float32).view(3, 5, 2)
    rows, times = packed_positions(batch_sizes, x.device)
    expected = x[rows, times]
    for layout in (x, x.transpose(0, 1).contiguous().transpose(0, 1)):  # contiguous, and not
        assert torch.equal(gather_running(layout, rows, times), expected)
    slots = torch.arange(15).view(3, 5)
    assert torch.equal(gather_running(slots, rows, times), slots[rows, times])
