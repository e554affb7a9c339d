#!/usr/bin/env python3
"""Writes a GGUF file's tokenizer tables (tokenizer.ggml.*) as JSON next to it, FILE.vocab.json,
for tests/test_tokenizer_smollm2.cpp (which skips when the dump is absent). Needs `pip install gguf`;
the tests never do.

Usage: python3 scripts/dump_gguf_vocab.py [FILE.gguf]
       (default: $ROSEINFER_MODEL_CACHE or ~/.cache/roseinfer, SmolLM2-135M-Instruct.Q4_1.gguf)
"""
import json
import os
import sys

from gguf import GGUFReader


def field_value(reader, key):
    field = reader.fields.get(key)
    if field is None:
        return None
    return field.contents()


def main():
    cache = os.environ.get("ROSEINFER_MODEL_CACHE", os.path.expanduser("~/.cache/roseinfer"))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")
    reader = GGUFReader(path)
    keys = {
        "model": "tokenizer.ggml.model", "pre": "tokenizer.ggml.pre",
        "tokens": "tokenizer.ggml.tokens", "token_types": "tokenizer.ggml.token_type",
        "scores": "tokenizer.ggml.scores", "merges": "tokenizer.ggml.merges",
        "bos_id": "tokenizer.ggml.bos_token_id", "eos_id": "tokenizer.ggml.eos_token_id",
        "eot_id": "tokenizer.ggml.eot_token_id", "unk_id": "tokenizer.ggml.unknown_token_id",
        "pad_id": "tokenizer.ggml.padding_token_id", "add_bos": "tokenizer.ggml.add_bos_token",
        "add_eos": "tokenizer.ggml.add_eos_token",
        "add_space_prefix": "tokenizer.ggml.add_space_prefix",
    }
    dump = {name: field_value(reader, key) for name, key in keys.items()}
    dump = {name: value for name, value in dump.items() if value is not None}
    out = os.path.splitext(path)[0] + ".vocab.json"
    with open(out, "w", encoding="utf-8") as f:
        json.dump(dump, f, ensure_ascii=False)
    print(f"{out}: {len(dump.get('tokens', []))} tokens, {len(dump.get('merges', []))} merges")


if __name__ == "__main__":
    main()
