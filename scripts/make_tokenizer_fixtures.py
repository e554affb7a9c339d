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

Usage: python3 scripts/make_tokenizer_fixtures.py [out_dir]   (default tests/fixtures/tokenizers)
"""
import json
import os
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
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


def byte_level_tokenizer(pre_tokenizer, special_tokens, ignore_merges):
    tokenizer = Tokenizer(models.BPE(ignore_merges=ignore_merges))
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


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/tokenizers"

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


if __name__ == "__main__":
    main()
