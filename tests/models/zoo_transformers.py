"""Transformer encoders of the edgert test zoo, built from torch.nn layers with random weights.

  BertStyleEncoder    token + learned positional embedding, LayerNorm, nn.TransformerEncoder
                      (post-norm, GELU), a tanh pooler on the first token; int64 input_ids and
                      attention_mask (1 = token, 0 = padding) as Hugging Face exports take them.
  SpeechEncoder       Whisper-tiny's encoder shape: Conv1d(80->384, k3) + GELU, Conv1d(k3,
                      stride 2) + GELU over log-mel frames, sinusoidal positions sliced to the
                      number of frames, pre-norm nn.TransformerEncoder layers, a final LayerNorm.

Both use nn.TransformerEncoder with enable_nested_tensor=False: its sparsity fast path (taken
under no_grad with a key padding mask) would return zeros at padded positions, which the
exported graph (the plain path) does not, so PyTorch's expected outputs would not match it.
The export itself runs with grad enabled, which keeps nn.MultiheadAttention off its fused
_native_multi_head_attention path (no ONNX symbolic).
"""
import math

import torch
import torch.nn as nn


class BertStyleEncoder(nn.Module):
    def __init__(self, vocab_size=30522, max_positions=512, d_model=256, heads=4, layers=4, ffn=1024):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model, padding_idx=0)
        self.position_embedding = nn.Embedding(max_positions, d_model)
        # Hugging Face's BERT slices a position-id buffer; exports show the same Slice.
        self.register_buffer("position_ids", torch.arange(max_positions).unsqueeze(0), persistent=False)
        self.embedding_norm = nn.LayerNorm(d_model, eps=1e-12)
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=ffn, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pooler = nn.Linear(d_model, d_model)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)  # BERT's initializer_range
        with torch.no_grad():
            self.token_embedding.weight[0].zero_()  # the padding token's row, as nn.Embedding keeps it
        self.facts = {"vocab_size": vocab_size, "max_positions": max_positions, "d_model": d_model,
                      "heads": heads, "layers": layers, "ffn": ffn, "activation": "gelu", "norm_first": False}

    def forward(self, input_ids, attention_mask):
        positions = self.position_ids[:, :input_ids.shape[1]]
        x = self.embedding_norm(self.token_embedding(input_ids) + self.position_embedding(positions))
        h = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        return h, torch.tanh(self.pooler(h[:, 0]))


def sinusoids(length, channels, max_timescale=10000):
    """Whisper's positional embedding: sin and cos halves of geometric timescales."""
    increment = math.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-increment * torch.arange(channels // 2))
    scaled_time = torch.arange(length)[:, None] * inv_timescales[None, :]
    return torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)


class SpeechEncoder(nn.Module):
    def __init__(self, mels=80, d_model=384, heads=6, layers=4, max_positions=1500):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, d_model, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d_model, d_model, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positional_embedding", sinusoids(max_positions, d_model))
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln_post = nn.LayerNorm(d_model)
        self.facts = {"mels": mels, "d_model": d_model, "heads": heads, "layers": layers, "ffn": 4 * d_model,
                      "max_frames": 2 * max_positions, "frame_stride": 2, "activation": "gelu", "norm_first": True}

    def forward(self, mel):
        x = nn.functional.gelu(self.conv1(mel))
        x = nn.functional.gelu(self.conv2(x)).permute(0, 2, 1)
        x = x + self.positional_embedding[:x.shape[1]]
        return self.ln_post(self.encoder(x))
