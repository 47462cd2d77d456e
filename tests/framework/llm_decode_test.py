"""LLM decoding on npusim (issue 20 item 4; docs/llm.md): `npusim run MODEL_DIR --decode N` on models a user saves
with transformers' `save_pretrained` (config.json + model.safetensors, random weights from the library's own
init, nothing downloaded), against transformers on the CPU in fp32.

The reference: the same model, run teacher-forced on the prompt followed by the tokens npusim generated; npusim's
logits of each generated token must match transformers' at that position within 2e-3 absolute (npusim computes in
fp16 as the Cube does; the logits here are O(0.5), measured errors about 5e-4), and its greedy tokens must equal
transformers' own `generate(do_sample=False)`. The models cover what the runner has to get right: grouped-query
heads (2 key/value heads for 4 query heads), Qwen2's q/k/v biases, a batch of 2, and pages of 16 rows so the
cache's pages fill, the decode steps cross page boundaries, and the block table's rows (3 pages, for the sequences'
final length) are longer than the first steps' keys need (2 pages).

Environment: NPUSIM is the npusim binary (ctest sets it).
"""

import json
import os
import subprocess

import numpy as np
import pytest
import torch
import transformers

NPUSIM = os.environ.get("NPUSIM", "npusim")
ATOL = 2e-3


def save_model(tmp_path, arch, **extra):
    kw = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=300, max_position_embeddings=512)
    kw.update(extra)
    torch.manual_seed(0)
    if arch == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**kw))
    else:
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**kw))
        with torch.no_grad():  # the library initialises biases to 0; make them count
            for layer in model.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    proj.bias.normal_(0, 0.1)
    model.eval()
    path = tmp_path / arch
    model.save_pretrained(path)
    return model, path


def npusim(*args, check=True):
    r = subprocess.run([NPUSIM, *map(str, args)], capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stderr
    return r


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_decoding_matches_transformers(tmp_path, arch):
    model, path = save_model(tmp_path, arch)
    batch, prompt_len, steps = 2, 30, 6  # pages of 16: 3 per sequence in the table, 2 used by the first steps
    ids = torch.randint(0, 300, (batch, prompt_len), generator=torch.Generator().manual_seed(1))
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "input_ids.npy", ids.numpy())
    out = tmp_path / "out"
    r = npusim("run", path, "--functional", "--decode", steps, "--page", 16, "--inputs", tmp_path / "in",
               "--outputs", out, "--json")
    report = json.loads(r.stdout)
    tokens, logits = np.load(out / "tokens.npy"), np.load(out / "logits.npy")
    assert tokens.shape == (batch, steps + 1) and tokens.dtype == np.int64
    assert logits.shape == (steps + 1, batch, 300)
    assert report["decode"]["tokens"] == tokens.tolist()
    assert report["decode"]["model"]["weights"].startswith("safetensors")

    full = torch.cat([ids, torch.from_numpy(tokens[:, :-1])], 1)
    with torch.no_grad():
        ref = model(full).logits.numpy()
    for s in range(steps + 1):
        err = np.abs(logits[s] - ref[:, prompt_len - 1 + s]).max()
        assert err < ATOL, f"step {s}: logits differ by {err}"
    with torch.no_grad():
        greedy = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=steps + 1, do_sample=False)
    assert tokens.tolist() == greedy[:, prompt_len:].tolist()


def test_timing_report(tmp_path):
    """Timing-only: no weights materialised; the keys docs/llm.md defines, each checked against its formula."""
    _, path = save_model(tmp_path, "llama", hidden_size=256, intermediate_size=512, num_hidden_layers=3,
                         num_attention_heads=8, num_key_value_heads=2)
    layers, batch, prompt_len, steps = 3, 4, 100, 3
    r = npusim("run", path, "--decode", steps, "--prompt-len", prompt_len, "--batch", batch, "--json")
    d = json.loads(r.stdout)["decode"]
    assert d["model"]["weights"].startswith("not materialised")
    assert (d["batch"], d["prompt_len"], d["steps"]) == (batch, prompt_len, steps)
    # Kernels: per layer RMSNorm, Q, K, V, RoPE x2, ReshapeAndCache, attention, O, Add, RMSNorm, gate, up, SiLU x up,
    # down, Add (16); then the final RMSNorm and the LM head; the embedding Gather first, and in the prefill a Gather
    # of each sequence's last row.
    def count(phase):
        return sum(k["count"] for k in phase["kernels"].values())
    assert count(d["prefill"]) == 16 * layers + 4
    assert d["prefill"]["kernels"]["FlashAttention"]["count"] == layers
    for step in d["decode_steps"]:
        assert count(step) == 16 * layers + 3
        assert step["kernels"]["PagedAttention"]["count"] == layers
    # A decode step reads every weight once, B rows of the embedding, the head (not tied) once: 2 bytes each (fp16).
    h, i, v, kv = 256, 512, 300, 2 * 32
    per_layer = h * h * 2 + h * kv * 2 + 3 * h * i + 2 * h
    assert d["weight_bytes_per_step"] == 2 * (layers * per_layer + batch * h + v * h + h)
    assert d["tpot_us"] == pytest.approx(sum(s["host_us"] for s in d["decode_steps"]) / steps)
    assert d["decode_weight_GBps"] == pytest.approx(d["weight_bytes_per_step"] / d["tpot_us"] / 1e3)
    assert 0 < d["decode_weight_hbm_fraction"] < 1
    assert d["ttft_us"] == d["prefill"]["host_us"] > 0
    # The cache: layers x K and V x batch x ceil((prompt + steps) / page) pages x page rows x KV heads x D x 2 B.
    pages = -(-(prompt_len + steps) // 128)
    assert d["kv_cache_bytes"] == layers * 2 * batch * pages * 128 * kv * 2


def test_bad_models_and_options_are_named(tmp_path):
    _, path = save_model(tmp_path, "llama")
    cfg = json.loads((path / "config.json").read_text())

    def bad(edit, message, *args):
        d = tmp_path / f"bad{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        c = dict(cfg)
        edit(c)
        (d / "config.json").write_text(json.dumps(c))
        r = npusim("run", d, *args, check=False)
        assert r.returncode == 1 and message in r.stderr, r.stderr

    bad(lambda c: c.update(architectures=["GPT2LMHeadModel"]), "GPT2LMHeadModel is not one the LLM runner models")
    bad(lambda c: c.pop("hidden_size"), "key 'hidden_size' is missing")
    bad(lambda c: c.update(num_key_value_heads=3), "not a multiple of num_key_value_heads 3")
    bad(lambda c: c.update(rope_parameters={"rope_type": "llama3", "rope_theta": 5e5}), "of type 'llama3' is not modelled")
    bad(lambda c: c.update(hidden_act="gelu"), "hidden_act 'gelu' is not modelled")
    bad(lambda c: c.update(max_position_embeddings=64), "pass the 64 positions", "--prompt-len", 60, "--decode", 5)
    r = npusim("run", path, "--decode", 2, "--page", 24, check=False)
    assert r.returncode != 0 and "--page" in r.stderr
    # The safetensors disagree with the config: the tensor and both shapes are named.
    c = dict(cfg, intermediate_size=96)
    (path / "config.json").write_text(json.dumps(c))
    r = npusim("run", path, "--functional", "--decode", 1, "--prompt-len", 4, check=False)
    assert r.returncode == 1 and "mlp.gate_proj.weight' is [128, 64], the model's config makes it [96, 64]" in r.stderr
    onnx_like = tmp_path / "m.onnx"
    onnx_like.write_bytes(b"")
    r = npusim("run", onnx_like, "--decode", 2, check=False)
    assert r.returncode == 1 and "run an LLM from its HuggingFace config.json" in r.stderr


def test_layer_replay_keeps_the_times_of_simulating_every_layer(tmp_path):
    """Layer replay (docs/llm.md): with the L2 at 24 MiB, the 22.5 MiB of weights of each of this model's six layers
    evict each other, so layers 2..5 start from the memory state layer 1 started from and take its kernel times.
    TTFT and TPOT must stay within 1 % of simulating every layer (measured: 0.4 % and 0.04 %). With the default
    192 MiB L2 the five other layers' weights (112 MiB) do not clear it: no replay."""
    _, path = save_model(tmp_path, "llama", hidden_size=1024, intermediate_size=2816, num_hidden_layers=6,
                         num_attention_heads=16, num_key_value_heads=4, vocab_size=8000)
    args = [path, "--decode", 3, "--prompt-len", 256, "--json"]
    small_l2 = ["--set", "l2.capacity=24MiB"]
    replayed = json.loads(npusim("run", *args, *small_l2).stdout)["decode"]
    simulated = json.loads(npusim("run", *args, *small_l2, "--no-replay").stdout)["decode"]
    assert (replayed["layers_simulated"], replayed["layers_replayed"]) == (2, 4)
    assert (simulated["layers_simulated"], simulated["layers_replayed"]) == (6, 0)
    assert replayed["ttft_us"] == pytest.approx(simulated["ttft_us"], rel=0.01)
    assert replayed["tpot_us"] == pytest.approx(simulated["tpot_us"], rel=0.01)
    assert replayed["decode_hbm_read_fraction"] is None  # replayed layers move no data
    assert simulated["decode_hbm_read_fraction"] > 0
    # Every layer's kernels are in the task list either way.
    for a, b in zip(replayed["decode_steps"], simulated["decode_steps"]):
        assert {k: v["count"] for k, v in a["kernels"].items()} == {k: v["count"] for k, v in b["kernels"].items()}
    default = json.loads(npusim("run", *args).stdout)["decode"]
    assert default["layers_replayed"] == 0


def test_python_api_generates_what_the_cli_does(tmp_path):
    """npusim.Device.generate: the same tokens and logits as `npusim run --decode` on the same prompts, with the
    device's memory back after each call (the Python device runs on)."""
    import npusim

    _, path = save_model(tmp_path, "qwen2")
    ids = np.random.default_rng(3).integers(0, 300, (2, 20))
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "input_ids.npy", ids)
    npusim_cli = npusim_run_outputs(tmp_path, path, 4)
    dev = npusim.Device(functional=True)
    used = dev.status()["hbm_used_bytes"]
    r = dev.generate(path, decode=4, prompt=ids, page=16)
    assert r.tokens.tolist() == npusim_cli["tokens"].tolist()
    np.testing.assert_array_equal(r.logits, npusim_cli["logits"])
    assert r.report["decode"]["ttft_us"] > 0 and r.report["decode"]["steps"] == 4
    assert dev.status()["hbm_used_bytes"] == used
    again = dev.generate(path, decode=4, prompt=ids, page=16)
    assert again.tokens.tolist() == r.tokens.tolist()
    # The config.json's path works as well: the weights are read from its directory.
    by_file = dev.generate(path / "config.json", decode=1, prompt=ids, page=16)
    assert by_file.report["decode"]["model"]["weights"].startswith("safetensors")
    assert by_file.tokens.tolist() == r.tokens[:, :2].tolist()
    with pytest.raises(npusim.InputError, match="token ids"):
        dev.generate(path, prompt=np.zeros(5))


def npusim_run_outputs(tmp_path, path, steps):
    out = tmp_path / "cli_out"
    npusim("run", path, "--functional", "--decode", steps, "--page", 16, "--inputs", tmp_path / "in", "--outputs", out)
    return {"tokens": np.load(out / "tokens.npy"), "logits": np.load(out / "logits.npy")}
