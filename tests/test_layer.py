"""A model's attention (snippets/layer.py): a transformers Llama layer under eager, sdpa and flex_attention,
run on the CPU at a small shape and checked as `capture` checks it, against the same layer in float64."""
import warnings
from pathlib import Path

import pytest
import torch

from attnprof.analysis import records
from attnprof.model import own, store
from attnprof.measure import own as capture_own
from attnprof.measure.numerics import make_inputs, relative_error
from attnprof.measure.verify import TOLERANCE
from attnprof.model.snippets import ROOT

IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention")
SMALL = (2, 8, 64, 16)  # B, H, S, D: 8 query heads sharing 2 key/value heads
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def function(name):
    """The function as `capture snippets/layer.py:NAME` loads it (by path, its signature checked)."""
    return capture_own.prepare(f"{Path(ROOT, own.LAYER)}:{name}")[2]


def in_float64(fn, q, k, v):
    """The capture's yardstick: the same function on the same inputs in float64, compiled code run eagerly."""
    with torch.compiler.set_stance("force_eager"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*(x.to(torch.float64) for x in (q, k, v)))


def test_the_snippet_offers_one_function_per_implementation():
    assert own.attention_functions(own.LAYER) == list(IMPLEMENTATIONS)
    assert [own.record_name(own.LAYER, f) for f in IMPLEMENTATIONS] == ["layer.eager", "layer.sdpa",
                                                                         "layer.flex_attention"]


@pytest.mark.parametrize("name, dtype", [("eager", "fp32"), ("eager", "bf16"), ("sdpa", "fp32"), ("sdpa", "bf16"),
                                         ("flex_attention", "bf16")])
def test_each_implementation_passes_the_captures_float64_check(name, dtype):
    fn = function(name)
    q, k, v = make_inputs(SMALL, DTYPES[dtype], "cpu")
    with torch.no_grad():
        out = capture_own.first_call(fn, [q, k, v], q, f"{name}(q, k, v)")  # q's shape and dtype, or one line
        err = relative_error(out, in_float64(fn, q, k, v))
    assert 0 < err <= TOLERANCE[dtype], err


def test_the_three_implementations_are_one_layer():
    """In float64 the three compute the same causal attention with the same weights: the masks each is
    given (none and is_causal, an additive one, a block mask) say the same thing."""
    q, k, v = make_inputs(SMALL, torch.float32, "cpu")
    with torch.no_grad():
        out = {name: in_float64(function(name), q, k, v) for name in IMPLEMENTATIONS}
    assert relative_error(out["eager"], out["sdpa"]) < 1e-6  # eager's softmax runs in float32, even here
    assert relative_error(out["flex_attention"], out["sdpa"]) < 1e-12
    # causal: the last position's hidden state reaches no earlier position's output
    later = q.clone()
    later[:, -1] = later[:, -1] + 1  # q's last head: the hidden states' last B·S/H positions (q read as [B, S, H·D])
    with torch.no_grad():
        moved = in_float64(function("sdpa"), later, k, v)
    first = SMALL[2] - SMALL[2] // SMALL[1]  # the first position q's last head holds
    rows = moved.reshape(SMALL[0], SMALL[2], -1), out["sdpa"].reshape(SMALL[0], SMALL[2], -1)
    assert torch.equal(rows[0][:, :first], rows[1][:, :first]) and not torch.equal(rows[0], rows[1])


def test_every_dtype_holds_the_same_weights():
    layer = function("sdpa").__globals__["layer"]
    low, _ = layer("sdpa", 8, 16, torch.device("cpu"), torch.bfloat16)
    wide, _ = layer("sdpa", 8, 16, torch.device("cpu"), torch.float64)
    for (name, a), (_, b) in zip(low.state_dict().items(), wide.state_dict().items()):
        assert torch.equal(a.to(torch.float64), b), name
    assert low.config.num_key_value_heads == 2 and low.config._attn_implementation == "sdpa"


def test_the_layers_captures_are_site_records_retaken_by_the_readers_command():
    layer = [own.record_name(own.LAYER, f) for f in IMPLEMENTATIONS]
    assert set(layer) <= set(records.OWN.records())
    assert not set(layer) & set(records.problems(kinds=[records.OWN]))  # committed and current
    for record, f in zip(layer, IMPLEMENTATIONS):
        assert records.OWN.fix(record) == (f"run `python -m attnprof capture snippets/layer.py:{f} --out docs/captures/{store.GPU}` "
                                           f"on a CUDA GPU")
        assert "snippets/layer.py" in records.OWN.sources(record)
