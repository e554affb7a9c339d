#!/usr/bin/env python3
"""Makes the tokenizer fixtures under tests/fixtures/tokenizers/<name>/.

Trains small byte-level BPE tokenizers with the Hugging Face `tokenizers` library on a built-in
multilingual corpus, then records the library's own ids and decoded text for a list of hard strings.
The C++ tests compare roseinfer's tokenizer against these reference outputs, so they need no Python.

  gpt2/           ByteLevel pre-tokenizer (GPT-2 regex), merges as "a b" strings, <|endoftext|>.
                  At most 1024 ids: also the tokenizer of the tiny model fixtures (vocab_size 1024).
  llama3/         Sequence[Split(Llama-3 pattern, Isolated), ByteLevel(use_regex=false)], merges as
                  pairs, ignore_merges true, <|begin_of_text|> and <|end_of_text|>.
  gpt2_prefix/    The gpt2 model with add_prefix_space and added tokens using lstrip, rstrip,
                  single_word and normalized, to pin down the added-token splitting rules.

  llama2/         SentencePiece-style BPE as Llama-2's tokenizer.json has it: Sequence[Prepend("▁"),
                  Replace(" ", "▁")] normalizer, no pre-tokenizer, byte_fallback with <0xNN> tokens,
                  unk fused, decoder Sequence[Replace, ByteFallback, Fuse, Strip], TemplateProcessing
                  adding <s>. Its merges are made from the vocabulary the way transformers'
                  converter makes them from SentencePiece scores (every split of every token, by the
                  merged token's id), so a GGUF-style "llama" vocab with score = -id must agree.
  mistral/        The same vocabulary as Mistral/TinyLlama files have it: Metaspace pre-tokenizer
                  (prepend_scheme "first", split false) and Metaspace decoder, [INST] added tokens.

  qwen2/          NFC normalizer, Sequence[Split(Qwen2 pattern: single digits), ByteLevel], merges
                  as pairs, <|endoftext|>, <|im_start|>, <|im_end|> and a normalized added token.

  nfc_cases.json  Inputs and their NFC from Python's unicodedata, for roseinfer's normalizer
                  (utf8proc).

Usage: python3 scripts/make_tokenizer_fixtures.py [out_dir]   (default tests/fixtures/tokenizers)
"""
import json
import os
import random
import sys

import unicodedata

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, trainers)

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

TRAINING_CORPUS = """\
The quick brown fox jumps over the lazy dog. The dog didn't care; it's been sleeping all day.
We'll see what they've done with the results: I'm sure you'd like them, and they're ready now.
Tokenizers split text into pieces, then merge the most frequent pairs of symbols into new tokens.
In 2024, 1,234,567 people visited the museum; the year before, only 987,654 did. Call 555-0199.
Version 3.14.159 was released on 2023-10-05 at 12:30:45 UTC with 42 fixes and 7 new features.
Café, naïve, résumé, façade, crème brûlée, jalapeño, Zürich, São Paulo, Ångström, Øresund.
Le cœur a ses raisons que la raison ne connaît point. Où est la bibliothèque? À bientôt!
Über den Wolken muss die Freiheit wohl grenzenlos sein. Straße, Größe, Mädchen, schön, fünf.
El niño comió una manzana mientras leía un libro en español. ¿Qué hora es? ¡Vámonos ya!
Москва — столица России. Привет, как дела? Всё хорошо, спасибо большое за помощь.
Η γλώσσα είναι ζωντανή. Καλημέρα σας! Ευχαριστώ πολύ για όλα.
東京は日本の首都です。今日はいい天気ですね。私は学生です。ありがとうございます。
北京是中国的首都。我喜欢学习中文。今天天气很好，我们去公园吧。你好，世界！
서울은 한국의 수도입니다. 안녕하세요! 만나서 반갑습니다. 감사합니다.
مرحبا بالعالم. كيف حالك اليوم؟ שלום עולם, מה שלומך? नमस्ते दुनिया, आप कैसे हैं?
Emoji: 😀 😃 😄 😁 😆 🎉 🚀 ❤️ 👍 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇺🇸 🇯🇵 ✨ 🔥 💯 🙏 🤖 🧠
def fibonacci(n: int) -> int:
    if n < 2:
        return n
    return fibonacci(n - 1) + fibonacci(n - 2)

for (int i = 0; i < 10; ++i) { sum += values[i] * weights[i]; }
std::vector<int32_t> ids = tokenizer.encode("hello world");
const x = {"key": "value", "list": [1, 2, 3], "nested": {"a": null, "b": true}};
SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;
if (x != nullptr && *x == 0x7f) return -1;  // check the sentinel
    indented line with four spaces
\tindented line with a tab
Lines end here.\r\nWindows lines end like this.\r\n
THE END IS NEAR. SHOUTING IS NOT NICE. I'LL STOP. YOU'RE RIGHT. WE'VE SEEN IT. HE'D AGREE.
"""


def byte_to_char_table():
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_CHAR = byte_to_char_table()


def training_lines():
    lines = TRAINING_CORPUS.splitlines(keepends=True)
    # A few passes with small variations so frequent pairs across scripts get merged.
    out = []
    for i in range(40):
        for line in lines:
            out.append(line if i % 2 == 0 else line.lower())
    return out


HARD_STRINGS = [
    "",
    " ",
    "a",
    "Hello world",
    "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog.",
    "café naïve résumé façade crème brûlée",
    "e\u0301 combining acute vs \u00e9 precomposed",
    "Ångström Øresund Zürich São Paulo",
    "Москва — столица России.",
    "東京は日本の首都です。",
    "北京是中国的首都。我喜欢学习中文。",
    "서울은 한국의 수도입니다.",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "😀",
    "emoji 😀😃😄 in text 🎉🚀",
    "family 👨‍👩‍👧‍👦 and flag 🏳️‍🌈 and 🇺🇸🇯🇵",
    "thumbs 👍🏽 skin tone",
    "\u200d\u200d zero width joiners alone \u200d",
    "\ufeffbyte order mark at the start",
    "    four leading spaces",
    "trailing spaces    ",
    "a  b   c    d     e",
    "\n",
    "\n\n\n",
    "line one\nline two\n\nline four",
    "\r\n windows \r\n\r\n lines",
    "\t",
    "tab\tseparated\t\tvalues",
    " \t \n \t\n  mixed whitespace  \n\t ",
    "12345678901234567890",
    "3.14159 2024-10-05 1,234,567",
    "a1b22c333d4444e55555",
    "١٢٣ ٤٥٦ arabic-indic digits and ½ ¾ vulgar fractions",
    "I'm you're we've they'll she'd it's don't",
    "I'M YOU'RE WE'VE THEY'LL SHE'D IT'S DON'T",
    "'s 't 're 've 'm 'll 'd",
    "'S 'T 'RE 'VE 'M 'LL 'D",
    "rock 'n' roll",
    "<|endoftext|>",
    "Hello<|endoftext|>world",
    "Hello <|endoftext|> world",
    "<|endoftext|><|endoftext|>",
    "<|endoftext",
    "endoftext|>",
    "<<|endoftext|>>",
    "<|begin_of_text|>Hello<|end_of_text|>",
    "<|begin_of_text|> spaced <|end_of_text|> tokens",
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) { a[i] = b[i] + c[i]; }",
    '{"key": "value", "n": [1, 2, 3]}',
    "x != nullptr && *x == 0x7f",
    "!!!??? ... --- ***",
    "@#$%^&*()_+-=[]{}|;':\",./<>?`~",
    "\\xff\\xfe not real bytes",
    "%FF%FE%00 percent encoded",
    "\x00\x01\x02\x7f control chars",
    "\ufffd replacement character",
    "\U0010ffff \U000e0001 edge code points",
    "Supercalifragilisticexpialidocious" * 20,
    "a" * 300,
    "😀" * 50,
    "1" * 100,
    " " * 100,
    "mixed中文and English混合text",
    "The café in 東京 served 🍣 for ¥1,200.",
]

GPT2_PREFIX_STRINGS = [
    "hello world",
    "say hello_world now",
    "xhello_world",
    "hello_worldx",
    "hello_world",
    "a [MASK] b",
    "a    [MASK]    b",
    "[MASK]",
    "x[MASK]y",
    "\n[MASK]\n",
    "<pad> <pad><pad>",
    "ab <sep> cd",
    "weird tok",
    "a weird token here",
    "<|endoftext|> start",
    "end <|endoftext|>",
]


NFC_STRINGS = [
    "e\u0301 cafe\u0301 re\u0301sume\u0301",
    "A\u030a \u212b \u00c5 three ways to write A-ring",
    "\u1100\u1161\u11a8 \u1100\u1161 \uac00\u11a8 hangul jamo",
    "\u1e0b\u0323 \u1e0d\u0307 d\u0307\u0323 d\u0323\u0307 mark reordering",
    "Vie\u0323\u0302t Nam ti\u00ea\u0301ng Vi\u1ec7t",
    "\u0041\u0308\u0304 \u01de u\u0308\u0301 \u01d8",
    "\u0958 \u0915\u093c devanagari exclusion",
    "\u2126 ohm sign, \u212a kelvin sign, \u00b4 acute",
    "\u0308\u0301 leading combining marks",
    "\u0f73 \u0f71\u0f72 tibetan",
    "fi\ufb01 ligature stays (compatibility only)",
    "caf\u00e9<|im_start|>e\u0301<|im_end|>",
    "n\u0303o special ñ",
]


def byte_level_tokenizer(pre_tokenizer, special_tokens, ignore_merges, normalizer=None):
    tokenizer = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if normalizer is not None:
        tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1000,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(training_lines(), trainer)
    return tokenizer


def write_fixture(out_dir, name, config, strings, note):
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
        f.write("\n")
    # The reference outputs come from the file exactly as written.
    tokenizer = Tokenizer.from_file(path)
    cases = []
    for text in strings:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        cases.append(
            {"text": text, "ids": ids, "decoded": tokenizer.decode(ids, skip_special_tokens=False)}
        )
    # Random id sequences: mostly broken UTF-8, which pins down the U+FFFD replacement rule.
    rng = random.Random(1234)
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    decode_cases = []
    for length in [1, 1, 2, 2, 3, 3, 4, 5, 8, 13, 21, 34]:
        ids = [rng.randrange(vocab_size) for _ in range(length)]
        decode_cases.append({"ids": ids, "decoded": tokenizer.decode(ids, skip_special_tokens=False)})
    # Byte tokens that start multi-byte characters, alone and in pairs.
    byte_ids = [tokenizer.token_to_id(c) for c in pre_tokenizers.ByteLevel.alphabet()]
    high = sorted(i for i in byte_ids if i is not None)
    for _ in range(12):
        ids = [rng.choice(high) for _ in range(rng.randrange(1, 6))]
        decode_cases.append({"ids": ids, "decoded": tokenizer.decode(ids, skip_special_tokens=False)})
    expected = {
        "note": note,
        "tokenizers_version": __import__("tokenizers").__version__,
        "vocab_size": vocab_size,
        "cases": cases,
        "decode_cases": decode_cases,
    }
    with open(os.path.join(folder, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{folder}: vocab {vocab_size}, {len(cases)} strings, {len(decode_cases)} decode cases")


def write_nfc_cases(out_dir):
    """Inputs and their NFC from unicodedata: every canonical decomposition, in NFD and as given,
    and random runs of letters, Hangul jamo and combining marks in random order."""
    inputs = []
    for c in range(0x110000):
        d = unicodedata.decomposition(chr(c))
        if d and not d.startswith("<"):
            inputs.append(chr(c))
            inputs.append(unicodedata.normalize("NFD", chr(c)))
    rng = random.Random(7)
    marks = [c for c in range(0x300, 0x370)] + [0x323, 0x328, 0x1DC0, 0x20D0, 0x05B0, 0x0F71, 0x0F72,
                                                0x093C, 0x3099, 0x309A]
    bases = [ord(c) for c in "aeiouAEIOUnNcCsSzZyY"] + [0x1100, 0x1161, 0x11A8, 0x0915, 0x304B, 0x0F40]
    pool = bases + marks
    for _ in range(400):
        inputs.append("".join(chr(rng.choice(pool)) for _ in range(rng.randrange(1, 8))))
    cases = [[text, unicodedata.normalize("NFC", text)] for text in inputs]
    path = os.path.join(out_dir, "nfc_cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"unicode_version": unicodedata.unidata_version, "cases": cases}, f,
                  ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{path}: {len(cases)} cases")


SPM_STRINGS = [
    "<s>Hello world</s>",
    "<s> Hello</s><s>world",
    "<unk> unk <unk>",
    "[INST] What is 2+2? [/INST] It is 4.</s>",
    "<s>[INST]Hello[/INST]",
    "\u2581 already a metaspace \u2581\u2581",
    "ünïcödé fällback: \U0001F9E0 \u2603 \u00a9",
    "  two leading spaces",
    " one leading space",
]


def spm_tokenizer():
    """A SentencePiece-like vocabulary: <unk> <s> </s>, the 256 byte tokens, then trained pieces
    (words start with "▁", never cross one), with Llama-2 style merges rebuilt from it."""
    trainer_tokenizer = Tokenizer(models.BPE())
    trainer_tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=900, limit_alphabet=120, show_progress=False)
    trainer_tokenizer.train_from_iterator(training_lines(), trainer)
    trained = sorted(trainer_tokenizer.get_vocab().items(), key=lambda item: item[1])
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    pieces += [piece for piece, _ in trained if piece not in pieces]
    vocab = {piece: i for i, piece in enumerate(pieces)}
    merges = []
    for piece, merged_id in vocab.items():
        if merged_id < 259:
            continue
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in vocab and right in vocab and vocab[left] >= 259 and vocab[right] >= 259:
                merges.append((merged_id, vocab[left], [left, right]))
    merges.sort()
    special = lambda content, i: {"id": i, "content": content, "single_word": False, "lstrip": False,
                                  "rstrip": False, "normalized": False, "special": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [special("<unk>", 0), special("<s>", 1), special("</s>", 2)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": True,
                  "byte_fallback": True, "ignore_merges": False, "vocab": vocab,
                  "merges": [pair for _, _, pair in merges]},
    }


def write_spm_fixtures(out_dir):
    llama2 = spm_tokenizer()
    strings = SPM_STRINGS + HARD_STRINGS
    write_fixture(out_dir, "llama2", llama2, strings,
                  "Llama-2 style SentencePiece BPE; encode(add_special_tokens=False)")
    check = Tokenizer.from_file(os.path.join(out_dir, "llama2", "tokenizer.json"))
    assert check.encode("Hi").ids[0] == 1, "the post-processor should add <s>"
    mistral = json.loads(json.dumps(llama2))
    mistral["normalizer"] = None
    mistral["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581",
                                "prepend_scheme": "first", "split": False}
    mistral["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                          "split": False}
    next_id = len(mistral["model"]["vocab"])
    for content in ["[INST]", "[/INST]"]:
        mistral["added_tokens"].append({"id": next_id, "content": content, "single_word": False,
                                        "lstrip": False, "rstrip": False, "normalized": False,
                                        "special": True})
        next_id += 1
    write_fixture(out_dir, "mistral", mistral, strings,
                  "Mistral style SentencePiece BPE (Metaspace); encode(add_special_tokens=False)")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/tokenizers"
    os.makedirs(out_dir, exist_ok=True)
    write_nfc_cases(out_dir)
    write_spm_fixtures(out_dir)

    gpt2 = byte_level_tokenizer(
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), ["<|endoftext|>"], False
    )
    gpt2_config = json.loads(gpt2.to_str())
    # The older file format (GPT-2's own tokenizer.json): merges as "a b" strings.
    gpt2_config["model"]["merges"] = [" ".join(pair) for pair in gpt2_config["model"]["merges"]]
    assert gpt2.get_vocab_size(with_added_tokens=True) <= 1024
    write_fixture(out_dir, "gpt2", gpt2_config, HARD_STRINGS,
                  "GPT-2 style byte-level BPE; encode(add_special_tokens=False)")

    llama3 = byte_level_tokenizer(
        pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        ),
        ["<|begin_of_text|>", "<|end_of_text|>"],
        True,
    )
    llama3_config = json.loads(llama3.to_str())
    llama3_config["model"]["ignore_merges"] = True
    # Trained vocabularies reach every entry through merges, so ignore_merges would change
    # nothing; Llama-3's has entries that merges split differently. Add such whole words.
    vocab = llama3_config["model"]["vocab"]
    for word in [" quick", " brown", " jumps", "Hello", " world", " windows", "separated", "中文"]:
        mapped = "".join(BYTE_TO_CHAR[b] for b in word.encode("utf-8"))
        if mapped not in vocab:
            vocab[mapped] = max(vocab.values()) + 1
    assert isinstance(llama3_config["model"]["merges"][0], list)
    write_fixture(out_dir, "llama3", llama3_config, HARD_STRINGS,
                  "Llama-3 style byte-level BPE; encode(add_special_tokens=False)")
    # The fixture must tell ignore_merges apart from plain merging.
    plain = dict(llama3_config, model=dict(llama3_config["model"], ignore_merges=False))
    plain_tokenizer = Tokenizer.from_str(json.dumps(plain))
    with_flag = Tokenizer.from_file(os.path.join(out_dir, "llama3", "tokenizer.json"))
    assert any(
        plain_tokenizer.encode(t, add_special_tokens=False).ids
        != with_flag.encode(t, add_special_tokens=False).ids
        for t in HARD_STRINGS
    ), "ignore_merges makes no difference on the fixture strings"

    # Same model as gpt2, with the added-token flags and add_prefix_space exercised.
    variant = Tokenizer.from_str(json.dumps(gpt2_config))
    variant.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    variant.add_special_tokens([AddedToken("[MASK]", lstrip=True, rstrip=True, normalized=False)])
    variant.add_special_tokens([AddedToken("<pad>", normalized=False)])
    variant.add_tokens([AddedToken("hello_world", single_word=True, normalized=False)])
    variant.add_tokens([AddedToken("<sep>", rstrip=True, normalized=True)])
    variant.add_tokens([AddedToken("weird tok", normalized=True)])
    variant_config = json.loads(variant.to_str())
    variant_config["model"]["merges"] = [
        m if isinstance(m, str) else " ".join(m) for m in variant_config["model"]["merges"]
    ]
    write_fixture(out_dir, "gpt2_prefix", variant_config, GPT2_PREFIX_STRINGS + HARD_STRINGS[:20],
                  "gpt2 with add_prefix_space and lstrip/rstrip/single_word added tokens")


    qwen2 = byte_level_tokenizer(
        pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        ),
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        False,
        normalizers.NFC(),
    )
    # Matched after normalization: the decomposed spelling in the text must find it too.
    qwen2.add_tokens([AddedToken("caf\u00e9!", normalized=True)])
    qwen2_config = json.loads(qwen2.to_str())
    assert qwen2_config["normalizer"] == {"type": "NFC"}
    write_fixture(out_dir, "qwen2", qwen2_config,
                  NFC_STRINGS + ["cafe\u0301! caf\u00e9!"] + HARD_STRINGS,
                  "Qwen2 style byte-level BPE with the NFC normalizer; encode(add_special_tokens=False)")


if __name__ == "__main__":
    main()
