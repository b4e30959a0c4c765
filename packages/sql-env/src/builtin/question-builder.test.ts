import { describe, expect, it } from 'vitest';
import { AppError, deriveSeed, Mulberry32 } from '@sqlenv/shared';
import { BUILTIN_DOMAINS } from './builtin-domains.ts';
import type { DomainRows, DomainSpec, RowData, TableSpec } from './domain-spec.ts';
import { buildQuestions } from './question-builder.ts';
import { defineTemplate, matchesAnswerShape, noTieAfter, sqlText, type QuestionTemplate } from './question-template.ts';
import { writeDatabase } from './sqlite-writer.ts';

const pets: TableSpec = {
  name: 'Pet Owners',
  columns: [
    { name: 'id', type: 'INTEGER', primaryKey: true },
    { name: 'name', type: 'TEXT' },
    { name: 'city', type: 'TEXT' },
    { name: 'pets', type: 'INTEGER' },
    { name: 'order', type: 'TEXT', nullable: true },
  ],
};
const rows: DomainRows = new Map<string, RowData[]>([
  [
    'Pet Owners',
    [
      { id: 1, name: "Ann O'Hara", city: 'Oslo', pets: 2, order: 'first' },
      { id: 2, name: 'Bo', city: 'Oslo', pets: 2, order: null },
      { id: 3, name: 'Cy', city: 'Rome', pets: 5, order: 'third' },
    ],
  ],
]);

function domainWith(templates: QuestionTemplate[]): DomainSpec {
  return { dbId: 'pets', title: 'Pets', summary: 'test', tables: [pets], generateRows: () => rows, templates };
}

function build(templates: QuestionTemplate[]): ReturnType<typeof buildQuestions> {
  const db = writeDatabase(':memory:', [pets], rows);
  try {
    return buildQuestions(db, domainWith(templates), new Mulberry32(1));
  } finally {
    db.close();
  }
}

describe('buildQuestions', () => {
  it('keeps only draws whose gold result has the promised shape, without duplicates', () => {
    const questions = build([
      defineTemplate({
        id: 'owners-in-city', answer: 'list', instances: 2,
        params: (p) => ({ city: p.text('SELECT DISTINCT city FROM "Pet Owners" ORDER BY city') }),
        question: ({ city }) => `Who lives in ${city}?`,
        sql: ({ city }) => `SELECT name FROM "Pet Owners" WHERE city = ${sqlText(city)}`,
      }),
    ]);
    // Rome has one owner (not a list), so only the Oslo draw survives, once.
    expect(questions.map((q) => q.question)).toEqual(['Who lives in Oslo?']);
  });

  it('drops draws whose check fails, e.g. a tie at the LIMIT', () => {
    const template = (id: string, k: number): QuestionTemplate =>
      defineTemplate({
        id, answer: k === 1 ? 'string' : 'list', instances: 1,
        params: () => ({}),
        question: () => `Top ${k} owners by pets?`,
        sql: () => `SELECT name FROM "Pet Owners" ORDER BY pets DESC LIMIT ${k}`,
        check: () => noTieAfter('SELECT pets FROM "Pet Owners" ORDER BY pets DESC', k),
      });
    // pets = 5, 2, 2: the top 1 is unambiguous, the top 2 is a tie.
    expect(build([template('top1', 1), template('top2', 2)]).map((q) => q.templateId)).toEqual(['top1']);
  });

  it('skips a template whose parameter query finds nothing, and escapes quotes in literals', () => {
    const questions = build([
      defineTemplate({
        id: 'nothing', answer: 'integer', instances: 1,
        params: (p) => ({ city: p.text("SELECT city FROM \"Pet Owners\" WHERE city = 'Paris'") }),
        question: ({ city }) => city,
        sql: () => 'SELECT 1',
      }),
      defineTemplate({
        id: 'quoted', answer: 'string', instances: 1,
        params: () => ({ name: "Ann O'Hara" }),
        question: ({ name }) => `In which position did ${name} order?`,
        sql: ({ name }) => `SELECT "order" FROM "Pet Owners" WHERE name = ${sqlText(name)}`,
      }),
    ]);
    expect(questions.map((q) => q.templateId)).toEqual(['quoted']);
  });

  it('throws on broken template SQL instead of silently skipping it', () => {
    expect(() =>
      build([defineTemplate({ id: 'broken', answer: 'integer', instances: 1, params: () => ({}), question: () => 'q', sql: () => 'SELECT nope FROM "Pet Owners"' })]),
    ).toThrow(AppError);
  });

  it('instantiates every built-in template with the default seed', () => {
    for (const domain of BUILTIN_DOMAINS) {
      const rng = new Mulberry32(deriveSeed(20_240_601, domain.dbId));
      const db = writeDatabase(':memory:', domain.tables, domain.generateRows(rng.fork('rows')));
      try {
        const ids = new Set(buildQuestions(db, domain, rng.fork('questions')).map((q) => q.templateId));
        expect(domain.templates.filter((t) => !ids.has(t.id)).map((t) => t.id), domain.dbId).toEqual([]);
        expect(new Set(domain.templates.map((t) => t.id)).size, domain.dbId).toBe(domain.templates.length);
      } finally {
        db.close();
      }
    }
  });
});

describe('matchesAnswerShape', () => {
  it('classifies scalar, list and table results', () => {
    expect(matchesAnswerShape('integer', ['n'], [[3]])).toBe(true);
    expect(matchesAnswerShape('integer', ['n'], [[0]])).toBe(false);
    expect(matchesAnswerShape('integer', ['n'], [[2.5]])).toBe(false);
    expect(matchesAnswerShape('float', ['x'], [[2.5]])).toBe(true);
    expect(matchesAnswerShape('float', ['x'], [[2]])).toBe(false);
    expect(matchesAnswerShape('string', ['s'], [['a']])).toBe(true);
    expect(matchesAnswerShape('string', ['s'], [['a'], ['b']])).toBe(false);
    expect(matchesAnswerShape('list', ['s'], [['a'], ['b']])).toBe(true);
    expect(matchesAnswerShape('list', ['s'], [['a'], [null]])).toBe(false);
    expect(matchesAnswerShape('table', ['a', 'b'], [['x', 1]])).toBe(true);
    expect(matchesAnswerShape('table', ['a'], [['x'], ['y']])).toBe(false);
    expect(matchesAnswerShape('list', ['s'], [])).toBe(false);
  });
});
