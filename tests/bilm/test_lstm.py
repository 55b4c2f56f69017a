"""The LSTM step: the in-place inference path equals the autograd path; tanh through sigmoid."""
import torch

from spacy_elmo.bilm.lstm import LSTMPLayer, _tanh_via_sigmoid_



def test_in_place_step_equals_autograd_step():
    torch.manual_seed(0)
    layer = LSTMPLayer(6, 12, 5, cell_clip=0.5, proj_clip=0.4)
    inputs = torch.randn(4, 7, 6) * 3
    batch_sizes = [4, 4, 3, 3, 2, 1, 0]
    state = (torch.randn(4, 5), torch.randn(4, 12))
    with torch.no_grad():
        fast_out, (fast_h, fast_c) = layer(inputs, batch_sizes, state)
    slow_out, (slow_h, slow_c) = layer(inputs.requires_grad_(), batch_sizes, state)
    torch.testing.assert_close(fast_out, slow_out.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(fast_h, slow_h.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(fast_c, slow_c.detach(), atol=1e-6, rtol=0)
    assert fast_out[1, 6].abs().max() == 0 and fast_out[0, 6].abs().max() == 0  # zero past each row's end
    # the caller's state is not modified in place
    assert state[1].requires_grad is False and not torch.equal(state[1], fast_c)


def test_tanh_via_sigmoid_close_to_tanh():
    x = torch.linspace(-20, 20, 4001)
    torch.testing.assert_close(_tanh_via_sigmoid_(x.clone()), torch.tanh(x), atol=2.5e-7, rtol=0)
    big = torch.randn(2, 64, 4096) * 4
    torch.testing.assert_close(_tanh_via_sigmoid_(big.clone()), torch.tanh(big), atol=2.5e-7, rtol=0)
