import { stripQuotes } from './match-cell.ts';

// Each pattern removes one layer of wrapping that LLMs put around an answer.
// They are applied repeatedly until nothing changes, so layers may nest in any
// order ("**Answer:** ```\n25\n```").
const FENCE_RE = /^```[^\n`]*\n([\s\S]*?)\n?```$/;
const ONE_LINE_FENCE_RE = /^```([^\n`]*)```$/;
const INLINE_CODE_RE = /^`([^`]+)`$/;
const ANSWER_TAG_RE = /^<answer>([\s\S]*)<\/answer>$/i;
const BOXED_RE = /^\$*\\boxed\{([\s\S]*)\}\$*$/;
const EMPHASIS_RE = /^(\*\*|__|\*|_)([\s\S]+)\1$/;
// "Answer:", "Final answer -", "**Answer:**", "The final answer is": the colon
// (or "is") is required so that a bare word "Answer" that is the answer survives.
// Written so that no two `\s*` can share a run of whitespace (`\s*((\*\*|__)\s*)?`
// rather than `\s*(\*\*|__)?\s*`): the shared form tried every split of a long
// run and took seconds on "answer" followed by 100 KB of spaces. Like every
// pattern here it is anchored, so a failed match costs time linear in the text.
export const ANSWER_PREFIX_RE = /^(?:\*\*|__)?\s*(?:the\s+)?(?:final\s+)?answer(?:\s*(?:(?:\*\*|__)\s*)?[:：]|\s+is\b\s*:?)\s*(?:(?:\*\*|__)\s*)?/i;
const MAX_ROUNDS = 8;

function unwrapOnce(text: string): string {
  const fence = FENCE_RE.exec(text) ?? ONE_LINE_FENCE_RE.exec(text);
  if (fence !== null) return fence[1] ?? '';
  const tag = ANSWER_TAG_RE.exec(text);
  if (tag !== null) return tag[1] ?? '';
  const boxed = BOXED_RE.exec(text);
  if (boxed !== null) return boxed[1] ?? '';
  const inline = INLINE_CODE_RE.exec(text);
  if (inline !== null) return inline[1] ?? '';
  const prefix = ANSWER_PREFIX_RE.exec(text);
  if (prefix !== null && prefix[0].length > 0) return text.slice(prefix[0].length);
  const emphasis = EMPHASIS_RE.exec(text);
  if (emphasis !== null) return emphasis[2] ?? '';
  const unquoted = stripQuotes(text);
  if (unquoted !== text) return unquoted;
  // A sentence-final period; "..." and a lone "." are content.
  if (text.length > 1 && text.endsWith('.') && !text.endsWith('..')) return text.slice(0, -1);
  return text;
}

/**
 * Strips an LLM's wrapping from an answer: code fences, inline code, an
 * `Answer:` / `Final answer:` / `The answer is` prefix (optionally bold),
 * `<answer>` tags, `\boxed{}`, emphasis, surrounding quotes and a trailing
 * period. Returns the trimmed core (possibly ""). Never extracts a value out of
 * a sentence: "There are 25" stays as it is, so guessing stays unrewarded.
 */
export function normaliseAnswerText(raw: string): string {
  let current = raw.trim();
  for (let round = 0; round < MAX_ROUNDS; round += 1) {
    const next = unwrapOnce(current).trim();
    if (next === current) break;
    current = next;
  }
  return current;
}
