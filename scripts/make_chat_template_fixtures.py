#!/usr/bin/env python3
"""Renders every template in ../shared/chat-templates with Python jinja2 configured as transformers
does (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, the `generation` tag,
its tojson, raise_exception and strftime_now) and writes the expected strings, or the expected
error, to tests/fixtures/chat_templates/expected.json for tests/test_chat_template.cpp.

Run from the repository root: python3 scripts/make_chat_template_fixtures.py [TEMPLATE_DIR]
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

# strftime_now reads this fixed moment so fixtures do not change with the day they were made; the
# C++ test passes the same moment through ChatTemplateOptions::now.
FIXED_NOW = datetime.datetime(2025, 3, 7, 14, 5, 9)
BOS, EOS = "<s>", "</s>"

CONVERSATIONS = {
    "system_user": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello!"},
    ],
    "user_only": [{"role": "user", "content": "What is the capital of France?"}],
    "multi_turn": [
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello, how can I help?"},
        {"role": "user", "content": "Name three colors.  "},
    ],
    "system_multi_turn": [
        {"role": "system", "content": "Answer briefly.\nUse plain text."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": " 4 "},
        {"role": "user", "content": "Und auf Deutsch? \"vier\" — ünïcødé"},
    ],
}


class TemplateError(Exception):
    """What raise_exception throws: the test expects exactly this message."""


class AssistantTracker(Extension):
    """transformers' `{% generation %}` tag; outside assistant-mask tracking it renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def make_environment():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, source, messages, add_generation_prompt):
    try:
        template = env.from_string(source)
        text = template.render(messages=messages, tools=None, documents=None,
                               add_generation_prompt=add_generation_prompt,
                               bos_token=BOS, eos_token=EOS)
        return {"text": text}
    except TemplateError as e:
        return {"raises": str(e)}
    except Exception as e:  # noqa: BLE001 - any other jinja2 error is expected as an error too
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    template_dir = sys.argv[1] if len(sys.argv) > 1 else "../shared/chat-templates"
    env = make_environment()
    index = json.load(open(os.path.join(template_dir, "index.json"), encoding="utf-8"))
    cases = []
    for entry in index:
        source = open(os.path.join(template_dir, entry["file"]), encoding="utf-8").read()
        for conversation, messages in CONVERSATIONS.items():
            for add_generation_prompt in (True, False):
                case = {"file": entry["file"], "conversation": conversation,
                        "add_generation_prompt": add_generation_prompt}
                case.update(render(env, source, messages, add_generation_prompt))
                cases.append(case)
    out = {"jinja2_version": jinja2.__version__, "bos_token": BOS, "eos_token": EOS,
           "now": FIXED_NOW.isoformat(), "conversations": CONVERSATIONS, "cases": cases}
    os.makedirs("tests/fixtures/chat_templates", exist_ok=True)
    with open("tests/fixtures/chat_templates/expected.json", "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum(1 for c in cases if "text" not in c)
    print(f"{len(index)} templates, {len(cases)} cases, {errors} raise or fail")


if __name__ == "__main__":
    main()
