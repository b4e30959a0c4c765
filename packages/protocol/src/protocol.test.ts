import { describe, expect, it } from 'vitest';
import { SqlActionSchema, openEnvSchemas, StepResultSchema } from './index.ts';

describe('SqlActionSchema', () => {
  it('accepts the four tools and rejects unknown types and fields', () => {
    expect(SqlActionSchema.parse({ action_type: 'QUERY', argument: 'SELECT 1' })).toEqual({ action_type: 'QUERY', argument: 'SELECT 1' });
    expect(SqlActionSchema.safeParse({ action_type: 'DROP', argument: 'x' }).success).toBe(false);
    expect(SqlActionSchema.safeParse({ action_type: 'QUERY', argument: 'x', extra: 1 }).success).toBe(false);
    expect(SqlActionSchema.safeParse({ action_type: 'QUERY' }).success).toBe(false);
  });
});

describe('openEnvSchemas', () => {
  it('publishes JSON Schemas generated from the zod schemas', () => {
    const schemas = openEnvSchemas();
    const action = schemas.action as { properties: Record<string, { enum?: string[] }>; required: string[]; additionalProperties: boolean };
    expect(action.properties['action_type']?.enum).toEqual(['DESCRIBE', 'SAMPLE', 'QUERY', 'ANSWER', 'PARSE_ERROR']);
    expect(action.required).toEqual(['action_type', 'argument']);
    expect(action.additionalProperties).toBe(false);
    expect(Object.keys((schemas.observation as { properties: object }).properties)).toContain('budget_remaining');
  });

  it('keeps reward and done beside the observation', () => {
    const parsed = StepResultSchema.safeParse({
      observation: { question: 'q', schema_info: '', result: '', error: '', step_count: 0, budget_remaining: 15, action_history: [], reward: 1 },
      reward: null,
      done: false,
    });
    expect(parsed.success).toBe(false);
  });
});
