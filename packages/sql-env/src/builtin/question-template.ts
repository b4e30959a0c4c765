import { AnswerType, type Cell } from '@sqlenv/protocol';

/**
 * Where template parameters come from: values drawn at random (seeded) from
 * the generated database itself, so every question talks about data that
 * exists. Each method throws if the parameter query returns nothing usable,
 * which rejects that draw.
 */
export interface ParamSource {
  /** A random value from the first column of `sql`'s rows; must be TEXT. */
  text(sql: string): string;
  /** A random value from the first column of `sql`'s rows; must be a number. */
  num(sql: string): number;
  /** The first two columns of a random row of `sql`, both TEXT (e.g. first and last name). */
  pair(sql: string): [string, string];
  /** Two different random values from the first column of `sql` (TEXT). */
  twoTexts(sql: string): [string, string];
  /** An integer in [min, max]. */
  int(min: number, max: number): number;
  pick<T>(items: readonly T[]): T;
}

export interface TemplateDefinition<P> {
  /** Stable id, unique within a domain (reported in docs and tests). */
  id: string;
  /** The answer shape the gold query must produce; a draw that does not is redrawn. */
  answer: AnswerType;
  /** Distinct instances wanted; parameterless templates use 1. */
  instances: number;
  params: (source: ParamSource) => P;
  question: (params: P) => string;
  sql: (params: P) => string;
  /**
   * A query whose single value must be truthy for the draw to be kept: how a
   * template rules out ambiguous instances (ties at a LIMIT, duplicate names).
   */
  check?: (params: P) => string;
}

export interface QuestionDraft {
  question: string;
  query: string;
  check: string | undefined;
}

/** A template with its parameter type erased, so a domain can list them together. */
export interface QuestionTemplate {
  id: string;
  answer: AnswerType;
  instances: number;
  draw(source: ParamSource): QuestionDraft;
}

export function defineTemplate<P>(definition: TemplateDefinition<P>): QuestionTemplate {
  return {
    id: definition.id,
    answer: definition.answer,
    instances: definition.instances,
    draw(source) {
      const params = definition.params(source);
      return {
        question: definition.question(params),
        query: definition.sql(params),
        check: definition.check?.(params),
      };
    },
  };
}

/** A SQL string literal (single quotes doubled), for values such as O'Brien. */
export function sqlText(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}

/**
 * A check that the k-th and (k+1)-th keys of `orderedKeySql` differ, i.e. a
 * "top k" question has one right answer. `orderedKeySql` selects the sort key
 * only, has the ORDER BY and no LIMIT.
 */
export function noTieAfter(orderedKeySql: string, k: number): string {
  return `SELECT (${orderedKeySql} LIMIT 1 OFFSET ${k - 1}) IS NOT (${orderedKeySql} LIMIT 1 OFFSET ${k})`;
}

/**
 * Whether a gold result has the shape its answer type promises. Besides
 * shape, answers never contain NULL (an agent cannot "answer" NULL) and a
 * scalar count of 0 is refused as uninformative.
 */
export function matchesAnswerShape(answer: AnswerType, columns: readonly string[], rows: readonly (readonly Cell[])[]): boolean {
  if (rows.length === 0 || rows.some((row) => row.some((cell) => cell === null || cell === ''))) return false;
  const scalar = columns.length === 1 && rows.length === 1 ? rows[0]?.[0] : undefined;
  switch (answer) {
    case AnswerType.INTEGER:
      return typeof scalar === 'number' && Number.isInteger(scalar) && scalar !== 0;
    case AnswerType.FLOAT:
      return typeof scalar === 'number' && !Number.isInteger(scalar);
    case AnswerType.STRING:
      return typeof scalar === 'string';
    case AnswerType.LIST:
      return columns.length === 1 && rows.length >= 2;
    case AnswerType.TABLE:
      return columns.length >= 2;
  }
}
