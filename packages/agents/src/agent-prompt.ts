import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ActionType, type SqlObservation } from '@sqlenv/protocol';
import { AppError, ErrorCode, formatZodIssues } from '@sqlenv/shared';

/**
 * The LLM agent's prompt, read from one text file a user can change
 * (packages/agents/prompts/sql-agent.md is the default; its header documents
 * the format). Sections start with `## <name>`; the tools section holds the
 * JSON tool schemas exactly as the chat template prints them.
 */

/** One tool the model may call, bound to the action it stands for. */
export interface AgentTool {
  /** The name the model writes (`describe`, `sample`, `query`, `answer`). */
  name: string;
  actionType: ActionType;
  /** The one parameter whose value becomes the action's argument (`table`, `sql`, `value`). */
  parameter: string;
  /** The schema as printed into the system turn. */
  definition: Readonly<Record<string, unknown>>;
}

export interface AgentPrompt {
  system: string;
  tools: readonly AgentTool[];
  /** Section templates (placeholders in braces). */
  user: string;
  observation: string;
  error: string;
  parseError: string;
  /** The file it came from (or 'built-in'). */
  source: string;
}

const SECTIONS = ['system', 'tools', 'user', 'observation', 'error', 'parse_error'] as const;
type SectionName = (typeof SECTIONS)[number];

/** Placeholders each template may use. */
const PLACEHOLDERS: Record<Exclude<SectionName, 'system' | 'tools'>, readonly string[]> = {
  user: ['question', 'schema_info'],
  observation: ['result', 'budget_remaining', 'step_count'],
  error: ['error', 'budget_remaining', 'step_count'],
  parse_error: ['reason'],
};

const ToolSchema = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string(),
    description: z.string().optional(),
    parameters: z.object({
      type: z.literal('object'),
      properties: z.record(z.string(), z.object({ type: z.literal('string') }).passthrough()),
    }).passthrough(),
  }).passthrough(),
}).passthrough();

export const DEFAULT_PROMPT_PATH = new URL('../prompts/sql-agent.md', import.meta.url);

/** Parse a prompt file's text; AppError VALIDATION naming the section and what is wrong. */
export function parseAgentPrompt(text: string, source = 'prompt'): AgentPrompt {
  const sections = new Map<SectionName, string>();
  let current: SectionName | undefined;
  let body: string[] = [];
  const flush = (): void => {
    if (current !== undefined) sections.set(current, body.join('\n').replace(/^\n+|\s+$/g, ''));
  };
  for (const line of text.replace(/\r\n/g, '\n').split('\n')) {
    const heading = /^## (\S+)\s*$/.exec(line);
    if (heading !== null) {
      flush();
      const name = heading[1] as SectionName;
      if (!SECTIONS.includes(name)) throw new AppError(ErrorCode.VALIDATION, `${source}: unknown section '## ${heading[1]}' (sections: ${SECTIONS.join(', ')})`);
      if (sections.has(name)) throw new AppError(ErrorCode.VALIDATION, `${source}: section '## ${name}' appears twice`);
      current = name;
      body = [];
      continue;
    }
    body.push(line);
  }
  flush();
  const missing = SECTIONS.filter((name) => !sections.has(name));
  if (missing.length > 0) throw new AppError(ErrorCode.VALIDATION, `${source}: missing section(s) ${missing.map((m) => `'## ${m}'`).join(', ')}`);
  for (const [name, allowed] of Object.entries(PLACEHOLDERS)) checkPlaceholders(sections.get(name as SectionName) ?? '', allowed, `${source} ## ${name}`);
  return {
    system: sections.get('system') ?? '',
    tools: parseTools(sections.get('tools') ?? '', source),
    user: sections.get('user') ?? '',
    observation: sections.get('observation') ?? '',
    error: sections.get('error') ?? '',
    parseError: sections.get('parse_error') ?? '',
    source,
  };
}

function parseTools(text: string, source: string): AgentTool[] {
  const tools: AgentTool[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch {
      throw new AppError(ErrorCode.VALIDATION, `${source} ## tools: not one JSON object per line: ${line.slice(0, 80)}`);
    }
    const parsed = ToolSchema.safeParse(json);
    if (!parsed.success) throw new AppError(ErrorCode.VALIDATION, `${source} ## tools: ${formatZodIssues(parsed.error)}`);
    const name = parsed.data.function.name;
    const actionType = name.toUpperCase();
    if (!(actionType in ActionType)) throw new AppError(ErrorCode.VALIDATION, `${source} ## tools: tool '${name}' is none of describe, sample, query, answer`);
    const parameters = Object.keys(parsed.data.function.parameters.properties);
    if (parameters.length !== 1) throw new AppError(ErrorCode.VALIDATION, `${source} ## tools: tool '${name}' must have exactly one string parameter (has ${parameters.length})`);
    if (tools.some((t) => t.name === name)) throw new AppError(ErrorCode.VALIDATION, `${source} ## tools: tool '${name}' is declared twice`);
    tools.push({ name, actionType: actionType as ActionType, parameter: parameters[0] as string, definition: json as Record<string, unknown> });
  }
  const missing = Object.values(ActionType).filter((a) => !tools.some((t) => t.actionType === a));
  if (missing.length > 0) throw new AppError(ErrorCode.VALIDATION, `${source} ## tools: no tool for ${missing.join(', ')}`);
  return tools;
}

function checkPlaceholders(template: string, allowed: readonly string[], label: string): void {
  for (const match of template.replace(/\{\{|\}\}/g, '').matchAll(/\{([^{}]*)\}/g)) {
    if (!allowed.includes(match[1] as string)) throw new AppError(ErrorCode.VALIDATION, `${label}: unknown placeholder {${match[1]}} (allowed: ${allowed.map((a) => `{${a}}`).join(' ')})`);
  }
}

/** Fill a template's placeholders (one pass, so values containing braces are left alone). */
export function fillTemplate(template: string, values: Readonly<Record<string, string | number>>): string {
  return template.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (whole, name: string | undefined) => {
    if (whole === '{{') return '{';
    if (whole === '}}') return '}';
    const value = name === undefined ? undefined : values[name];
    return value === undefined ? whole : String(value);
  });
}

/** Read a prompt file (the default one when `path` is undefined). */
export function loadAgentPrompt(path?: string): AgentPrompt {
  const target = path ?? DEFAULT_PROMPT_PATH;
  let text: string;
  try {
    text = readFileSync(target, 'utf8');
  } catch (cause) {
    throw new AppError(ErrorCode.VALIDATION, `cannot read prompt file ${String(path ?? 'built-in')}`, { cause });
  }
  return parseAgentPrompt(text, path ?? 'built-in prompt');
}

/** The first user turn's text. */
export function renderFirstUser(prompt: AgentPrompt, observation: SqlObservation): string {
  return fillTemplate(prompt.user, { question: observation.question, schema_info: observation.schema_info });
}

/** A tool response: the environment's result or error text, as it rendered them. */
export function renderToolResult(prompt: AgentPrompt, observation: SqlObservation): string {
  const common = { budget_remaining: observation.budget_remaining, step_count: observation.step_count };
  return observation.error === ''
    ? fillTemplate(prompt.observation, { result: observation.result, ...common })
    : fillTemplate(prompt.error, { error: observation.error, ...common });
}
