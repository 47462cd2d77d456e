#!/usr/bin/env python3
"""Writes six HuggingFace `transformers` models as ONNX: GPT-2, BERT, LLaMA, Qwen2, ViT and the Whisper encoder, each
built from a config written here with the library's own random initialisation (no download, no pretrained weights),
in inference mode, exported with torch.onnx.export's defaults (the torch.export-based exporter). Each model returns
its last hidden state as `y`. With --reference, also the inputs (NAME_in/INPUT.npy) and PyTorch's output
(NAME_ref/y.npy) for `npusim run NAME.onnx --functional --inputs NAME_in --outputs OUT`.

The language models take token ids (int64); BERT and LLaMA also take an attention mask with the last tokens padded,
so the exported graph builds the padding mask from an input at run time (the others' masks fold into constants).

Sizes: small (2 layers, hidden 128, 4 heads, 32 tokens; for tests) and base (the published base shapes with 2
layers: GPT-2 768/12, BERT 768/12, LLaMA 4096/32 with 8 KV heads, Qwen2 896/14 with 2 KV heads, ViT-B/16 at
224 x 224, Whisper-base's encoder on 3000 mel frames; 128 tokens).
Usage: make_hf.py [--size small|base] [--models gpt2,bert,...] [--out DIR] [--reference]"""
import argparse
import os
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")

MODELS = ("gpt2", "bert", "llama", "qwen2", "vit", "whisper")


def shapes(size):
    if size == "small":
        return dict(layers=2, hidden=128, heads=4, ffn=256, vocab=512, seq=32, kv=2, image=32, patch=8, mel=16,
                    frames=64)
    return dict(layers=2, hidden=768, heads=12, ffn=3072, vocab=32000, seq=128, kv=8, image=224, patch=16, mel=80,
                frames=3000)


def build(name, size):
    """The model and its example inputs (name -> tensor)."""
    import transformers as tf

    s = shapes(size)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, s["vocab"], (1, s["seq"]), generator=g)
    padded = torch.ones(1, s["seq"], dtype=torch.int64)
    padded[:, -4:] = 0  # the last four tokens are padding
    if name == "gpt2":
        c = tf.GPT2Config(n_layer=s["layers"], n_embd=s["hidden"], n_head=s["heads"], vocab_size=s["vocab"],
                          n_positions=max(64, s["seq"]), bos_token_id=0, eos_token_id=0)
        return tf.GPT2Model(c), {"input_ids": ids}
    if name == "bert":
        c = tf.BertConfig(num_hidden_layers=s["layers"], hidden_size=s["hidden"], num_attention_heads=s["heads"],
                          intermediate_size=s["ffn"], vocab_size=s["vocab"], max_position_embeddings=max(64, s["seq"]))
        return tf.BertModel(c, add_pooling_layer=False), {"input_ids": ids, "attention_mask": padded}
    if name in ("llama", "qwen2"):
        hidden, heads, kv = s["hidden"], s["heads"], s["kv"]
        if size == "base":
            hidden, heads, kv = (4096, 32, 8) if name == "llama" else (896, 14, 2)
        cls = (tf.LlamaConfig, tf.LlamaModel) if name == "llama" else (tf.Qwen2Config, tf.Qwen2Model)
        c = cls[0](num_hidden_layers=s["layers"], hidden_size=hidden, num_attention_heads=heads,
                   num_key_value_heads=kv, intermediate_size=s["ffn"] if size == "small" else hidden * 8 // 3,
                   vocab_size=s["vocab"], max_position_embeddings=max(64, s["seq"]))
        inputs = {"input_ids": ids}
        if name == "llama":
            inputs["attention_mask"] = padded
        return cls[1](c), inputs
    if name == "vit":
        c = tf.ViTConfig(num_hidden_layers=s["layers"], hidden_size=s["hidden"], num_attention_heads=s["heads"],
                         intermediate_size=s["ffn"], image_size=s["image"], patch_size=s["patch"])
        x = torch.randn(1, 3, s["image"], s["image"], generator=g)
        return tf.ViTModel(c, add_pooling_layer=False), {"pixel_values": x}
    if name == "whisper":
        from transformers.models.whisper.modeling_whisper import WhisperEncoder

        c = tf.WhisperConfig(encoder_layers=s["layers"], d_model=s["hidden"], encoder_attention_heads=s["heads"],
                             encoder_ffn_dim=s["ffn"], num_mel_bins=s["mel"], max_source_positions=s["frames"] // 2)
        x = torch.randn(1, s["mel"], s["frames"], generator=g)
        return WhisperEncoder(c), {"input_features": x}
    raise ValueError(f"unknown model {name!r} (one of {', '.join(MODELS)})")


class LastHidden(torch.nn.Module):
    """The model called with keyword inputs, returning last_hidden_state (no KV cache)."""

    def __init__(self, model, names, cache):
        super().__init__()
        self.model, self.names, self.cache = model, names, cache

    def forward(self, *args):
        kw = dict(zip(self.names, args))
        if self.cache:
            kw["use_cache"] = False
        return self.model(**kw).last_hidden_state


def wrapped(name, size):
    torch.manual_seed(0)
    model, inputs = build(name, size)
    return LastHidden(model.eval(), list(inputs), name in ("gpt2", "llama", "qwen2")).eval(), inputs


def export(name, size, out, reference):
    model, inputs = wrapped(name, size)
    path = os.path.join(out, f"{name}.onnx")
    torch.onnx.export(model, tuple(inputs.values()), path, input_names=list(inputs), output_names=["y"])
    if reference:
        with torch.no_grad():
            y = model(*inputs.values())
        os.makedirs(os.path.join(out, f"{name}_in"), exist_ok=True)
        os.makedirs(os.path.join(out, f"{name}_ref"), exist_ok=True)
        for k, v in inputs.items():
            np.save(os.path.join(out, f"{name}_in", f"{k}.npy"), v.numpy())
        np.save(os.path.join(out, f"{name}_ref", "y.npy"), y.numpy())
    print(f"wrote {path}")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=("small", "base"), default="small")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--reference", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.models.split(","):
        export(name, args.size, args.out, args.reference)


if __name__ == "__main__":
    main()
