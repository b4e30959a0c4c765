import type Database from 'better-sqlite3';
import { AppError, ErrorCode } from '@sqlenv/shared';
import type { AnswerType, Cell } from '@sqlenv/protocol';
import type { DomainSpec } from './domain-spec.ts';
import { matchesAnswerShape, type ParamSource } from './question-template.ts';
import type { Mulberry32 } from '@sqlenv/shared';

/** Draws per wanted instance before a template gives up (empty results, ties, duplicates). */
const ATTEMPTS_PER_INSTANCE = 12;

export interface GeneratedQuestion {
  db_id: string;
  question: string;
  query: string;
  templateId: string;
  answer: AnswerType;
}

/** Thrown by a ParamSource when a parameter query offers nothing usable: the draw is redrawn. */
class NoParameter extends Error {}

interface QueryResult {
  columns: string[];
  rows: Cell[][];
}

function runQuery(db: Database.Database, sql: string): QueryResult {
  const statement = db.prepare(sql);
  const columns = statement.columns().map((column) => column.name);
  const rows = statement.raw(true).all() as Cell[][];
  return { columns, rows };
}

function createParamSource(db: Database.Database, rng: Mulberry32): ParamSource {
  // Parameter queries repeat across draws; the data is frozen, so cache them.
  const cache = new Map<string, Cell[][]>();
  const rowsOf = (sql: string): Cell[][] => {
    let rows = cache.get(sql);
    if (rows === undefined) {
      rows = runQuery(db, sql).rows;
      cache.set(sql, rows);
    }
    if (rows.length === 0) throw new NoParameter(sql);
    return rows;
  };
  const asText = (cell: Cell | undefined): string => {
    if (typeof cell !== 'string' || cell === '') throw new NoParameter('expected TEXT');
    return cell;
  };
  return {
    text: (sql) => asText(rng.pick(rowsOf(sql))[0]),
    num: (sql) => {
      const cell = rng.pick(rowsOf(sql))[0];
      if (typeof cell !== 'number') throw new NoParameter('expected a number');
      return cell;
    },
    pair: (sql) => {
      const row = rng.pick(rowsOf(sql));
      return [asText(row[0]), asText(row[1])];
    },
    twoTexts: (sql) => {
      const rows = rowsOf(sql);
      if (rows.length < 2) throw new NoParameter('need two values');
      const [a, b] = rng.sample(rows, 2);
      return [asText(a?.[0]), asText(b?.[0])];
    },
    int: (min, max) => rng.int(min, max),
    pick: (items) => rng.pick(items),
  };
}

function isTruthy(cell: Cell | undefined): boolean {
  return cell !== undefined && cell !== null && cell !== 0 && cell !== '0' && cell !== '';
}

/**
 * Instantiates a domain's templates against its freshly written database.
 * A draw is kept only if its gold query returns a non-empty result of the
 * promised shape, its check (if any) passes, and it is not a duplicate.
 * SQL errors are template bugs and are thrown, not skipped. `exclude` holds queries that must
 * not be drawn again (extra training draws skip every question already in the dataset);
 * `instancesPerTemplate` scales each template's wanted count.
 */
export function buildQuestions(
  db: Database.Database,
  domain: DomainSpec,
  rng: Mulberry32,
  options: { instancesPerTemplate?: (instances: number) => number; exclude?: ReadonlySet<string> } = {},
): GeneratedQuestion[] {
  const source = createParamSource(db, rng);
  const questions: GeneratedQuestion[] = [];
  const seenQueries = new Set<string>(options.exclude);
  for (const template of domain.templates) {
    const wanted = options.instancesPerTemplate?.(template.instances) ?? template.instances;
    let accepted = 0;
    for (let attempt = 0; attempt < wanted * ATTEMPTS_PER_INSTANCE && accepted < wanted; attempt++) {
      let draft;
      try {
        draft = template.draw(source);
      } catch (error) {
        if (error instanceof NoParameter) continue;
        throw error;
      }
      if (seenQueries.has(draft.query)) continue;
      seenQueries.add(draft.query);
      try {
        const gold = runQuery(db, draft.query);
        if (!matchesAnswerShape(template.answer, gold.columns, gold.rows)) continue;
        if (draft.check !== undefined && !isTruthy(runQuery(db, draft.check).rows[0]?.[0])) continue;
      } catch (error) {
        throw new AppError(ErrorCode.INTERNAL, `built-in template ${domain.dbId}/${template.id} has broken SQL: ${String(error)}`, {
          cause: error,
          details: { query: draft.query, check: draft.check },
        });
      }
      questions.push({ db_id: domain.dbId, question: draft.question, query: draft.query, templateId: template.id, answer: template.answer });
      accepted++;
    }
  }
  return questions;
}
