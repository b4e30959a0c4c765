"""Render chat conversations with a Hugging Face chat template, the way transformers does
(jinja2 ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
tojson = json.dumps(ensure_ascii=False)). For agent-prompt.test.ts.

stdin: {"template_file": path to a tokenizer_config.json, "cases": [{"messages": [...],
        "tools": [...], "add_generation_prompt": bool, "enable_thinking": bool | null}]}
stdout: a JSON list with the rendered text of each case.
"""
import json
import sys

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

request = json.load(sys.stdin)
source = json.load(open(request["template_file"], encoding="utf-8"))["chat_template"]
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False: json.dumps(x, ensure_ascii=ensure_ascii, indent=indent)
template = env.from_string(source)
out = []
for case in request["cases"]:
    kwargs = {"messages": case["messages"], "tools": case.get("tools"), "add_generation_prompt": case["add_generation_prompt"]}
    if case.get("enable_thinking") is not None:
        kwargs["enable_thinking"] = case["enable_thinking"]
    out.append(template.render(**kwargs))
json.dump(out, sys.stdout, ensure_ascii=False)
