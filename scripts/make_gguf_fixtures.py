#!/usr/bin/env python3
"""Writes tests/fixtures/gguf/quant_types.gguf: for each ggml type roseinfer dequantizes, a tensor
"q.<TYPE>" stored in that type and "expected.<TYPE>", the Python gguf package's dequantization of
the same bytes, stored as F32. tests/test_gguf.cpp checks our C++ dequantizer against them.

Types the package can quantize (F32..Q8_0) hold random normal data quantized by gguf.quants; the
K-quants, which it can only dequantize, hold random block bytes with finite, small fp16 scales.

Needs: pip install gguf==0.19 numpy. Run from the repository root.
"""
import sys

import numpy as np
import gguf
from gguf import quants
from gguf.constants import GGMLQuantizationType as T, GGML_QUANT_SIZES

OUT = "tests/fixtures/gguf/quant_types.gguf"
TINY = "tests/fixtures/gguf/tiny_llama.gguf"  # also the fuzzer's seed
TINY_QUANT = "tests/fixtures/gguf/tiny_llama_quant.gguf"
ROWS, COLS = 3, 512
QUANTIZABLE = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
# Byte offsets of the fp16 scale fields in each K-quant block (ggml-common.h layouts).
K_QUANT_HALVES = {T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}


def random_k_blocks(rng, qtype, rows, cols, half_range=0.05):
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    blocks = rows * cols // block_elems
    raw = rng.integers(0, 256, size=(blocks, block_bytes), dtype=np.uint8)
    for offset in K_QUANT_HALVES[qtype]:
        halves = rng.uniform(-half_range, half_range, size=blocks).astype(np.float16)
        raw[:, offset:offset + 2] = halves.view(np.uint8).reshape(blocks, 2)
    return raw.reshape(rows, cols // block_elems * block_bytes)


def main():
    rng = np.random.default_rng(20261123)
    writer = gguf.GGUFWriter(OUT, "fixture")
    writer.add_string("fixture.note", "q.<TYPE> tensors and their gguf.quants.dequantize values")
    for qtype in QUANTIZABLE + list(K_QUANT_HALVES):
        if qtype in QUANTIZABLE:
            data = rng.standard_normal((ROWS, COLS)).astype(np.float32)
            stored = quants.quantize(data, qtype)
        else:
            stored = random_k_blocks(rng, qtype, ROWS, COLS)
        expected = quants.dequantize(stored, qtype).astype(np.float32)
        assert expected.shape == (ROWS, COLS) and np.isfinite(expected).all(), qtype.name
        writer.add_tensor(f"q.{qtype.name}", stored, raw_dtype=qtype)
        writer.add_tensor(f"expected.{qtype.name}", expected)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {OUT}", file=sys.stderr)


def converter_permute(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: HF q/k rows into llama.cpp's RoPE pair order."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def write_tiny_llama():
    """A 1-layer llama (hidden 32, 4 heads, 2 kv heads, vocab 16) with F32 weights, q/k rows
    permuted as the converter does, plus "reference.q_proj" / "reference.k_proj" holding the
    Hugging Face row order the weight source must give back."""
    rng = np.random.default_rng(7)
    hidden, heads, kv_heads, head_dim, inter, vocab = 32, 4, 2, 8, 64, 16
    w = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    writer = gguf.GGUFWriter(TINY, "llama")
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(inter)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list([f"t{i}" for i in range(vocab)])
    writer.add_token_types([3] + [1] * (vocab - 1))
    writer.add_token_merges(["t 1"])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)
    writer.add_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}")
    q, k = w(heads * head_dim, hidden), w(kv_heads * head_dim, hidden)
    writer.add_tensor("token_embd.weight", w(vocab, hidden))
    writer.add_tensor("blk.0.attn_norm.weight", w(hidden))
    writer.add_tensor("blk.0.attn_q.weight", converter_permute(q, heads))
    writer.add_tensor("blk.0.attn_k.weight", converter_permute(k, kv_heads))
    writer.add_tensor("blk.0.attn_v.weight", w(kv_heads * head_dim, hidden))
    writer.add_tensor("blk.0.attn_output.weight", w(hidden, hidden))
    writer.add_tensor("blk.0.ffn_norm.weight", w(hidden))
    writer.add_tensor("blk.0.ffn_gate.weight", w(inter, hidden))
    writer.add_tensor("blk.0.ffn_up.weight", w(inter, hidden))
    writer.add_tensor("blk.0.ffn_down.weight", w(hidden, inter))
    writer.add_tensor("output_norm.weight", w(hidden))
    writer.add_tensor("reference.q_proj", q)
    writer.add_tensor("reference.k_proj", k)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# The fp16 scale range per K-quant that keeps random blocks' weights around +-0.1 (the integer
# scale times the quant reaches ~250 for Q2_K/Q3_K and ~500-2000 for the others).
K_QUANT_MODEL_HALVES = {T.Q2_K: 6e-3, T.Q3_K: 3e-3, T.Q4_K: 4e-4, T.Q5_K: 2e-4, T.Q6_K: 1e-4}


def stored_weights(rng, qtype, rows, cols):
    if qtype in K_QUANT_MODEL_HALVES:
        return random_k_blocks(rng, qtype, rows, cols, K_QUANT_MODEL_HALVES[qtype])
    data = (0.1 * rng.standard_normal((rows, cols))).astype(np.float32)
    return data if qtype == T.F32 else quants.quantize(data, qtype)


def write_tiny_llama_quant():
    """A 2-layer llama (hidden 256, 4 heads of 64, 2 kv heads, vocab 32, untied head) whose
    tensors use every type we dequantize, q/k in converter order, for the GPU load test: the
    device dequantization must give the same logits as the CPU one. Random rows (K-quants: random
    blocks) stand in for a trained model; the permutation is applied to already-stored rows."""
    rng = np.random.default_rng(11)
    hidden, heads, kv_heads, head_dim, inter, vocab = 256, 4, 2, 64, 256, 32
    writer = gguf.GGUFWriter(TINY_QUANT, "llama")
    writer.add_block_count(2)
    writer.add_context_length(256)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(inter)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list([f"t{i}" for i in range(vocab)])
    writer.add_token_types([3] + [1] * (vocab - 1))
    writer.add_token_merges(["t 1"])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)

    def add(name, qtype, rows, cols, permute_heads=0):
        stored = stored_weights(rng, qtype, rows, cols)
        if permute_heads:  # whole rows move, so the blocks stay intact
            stored = converter_permute(stored, permute_heads)
        writer.add_tensor(name, stored, raw_dtype=None if qtype == T.F32 else qtype)

    def norm(name, qtype):
        data = (1.0 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)
        stored = data if qtype == T.F32 else quants.quantize(data, qtype)
        writer.add_tensor(name, stored, raw_dtype=None if qtype == T.F32 else qtype)

    layer_types = [
        [T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0],
        [T.Q5_1, T.Q2_K, T.Q3_K, T.F16, T.BF16, T.Q4_K, T.Q6_K],
    ]
    add("token_embd.weight", T.Q5_K, vocab, hidden)
    for layer, (tq, tk, tv, to, tg, tu, td) in enumerate(layer_types):
        g = f"blk.{layer}."
        norm(g + "attn_norm.weight", T.F32 if layer == 0 else T.F16)
        add(g + "attn_q.weight", tq, heads * head_dim, hidden, heads)
        add(g + "attn_k.weight", tk, kv_heads * head_dim, hidden, kv_heads)
        add(g + "attn_v.weight", tv, kv_heads * head_dim, hidden)
        add(g + "attn_output.weight", to, hidden, heads * head_dim)
        norm(g + "ffn_norm.weight", T.F32 if layer == 0 else T.BF16)
        add(g + "ffn_gate.weight", tg, inter, hidden)
        add(g + "ffn_up.weight", tu, inter, hidden)
        add(g + "ffn_down.weight", td, hidden, inter)
    norm("output_norm.weight", T.F32)
    add("output.weight", T.Q8_0, vocab, hidden)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
    write_tiny_llama()
    write_tiny_llama_quant()
