"""The seed's failing test, in small, for ``flagos-doctor explain`` on the H200.

The seed bug began as a failing ``test_generate_compile_model_forward_fullgraph`` in another
project's suite; here a model on torch_fl's ``flagos`` device is compiled with
``fullgraph=True`` and called, beside an eager control. ``run.sh explain`` runs this file as
``flagos-doctor explain --stack torch_fl -- python3 -m pytest`` on the real torch_fl 1adbc97
(not collected by the repository's own suite: ``testpaths`` is ``tests``).
"""

import torch
import torch_fl  # noqa: F401  (registers the flagos device, as a user's conftest would)


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(10, 10), torch.nn.ReLU(), torch.nn.Linear(10, 4)).to("flagos")


def test_eager_model_on_flagos():
    model = _model()
    x = torch.randn(8, 10, device="flagos")
    assert model(x).shape == (8, 4)


def test_seed_reproducer_linear_compiled_fullgraph():
    model = torch.nn.Linear(10, 10).to("flagos")
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(2, 10, device="flagos")
    torch.testing.assert_close(compiled(x), model(x))


def test_model_compiled_fullgraph_matches_eager():
    model = _model()
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(8, 10, device="flagos")
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
