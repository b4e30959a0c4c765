import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { AnswerType, Cell } from '@sqlenv/protocol';
import { verifyAnswer, type GoldAnswer } from './verify-answer.ts';
import { formatGoldAnswer } from './format-gold-answer.ts';
import { deriveAnswerType } from './derive-answer-type.ts';

function gold(answerType: AnswerType, rows: Cell[][], columns?: string[]): GoldAnswer {
  const width = rows[0]?.length ?? 1;
  return {
    answer_type: answerType,
    gold_answer: formatGoldAnswer(answerType, rows),
    gold_rows: rows,
    gold_columns: columns ?? Array.from({ length: width }, (_, i) => `c${i}`),
  };
}

// ---- generators -------------------------------------------------------------
const integerCell = fc.oneof(fc.integer({ min: -1_000_000, max: 1_000_000 }), fc.maxSafeInteger(), fc.constant(0));
const floatCell = fc
  .double({ min: -1e12, max: 1e12, noNaN: true, noDefaultInfinity: true })
  .filter((x) => !Number.isInteger(x) && Math.abs(x) > 1e-300);
// Any text at all, including quotes, pipes, commas, newlines and backslashes.
const anyText = fc.string({ unit: 'binary-ascii', maxLength: 12 });
const wordText = fc.stringMatching(/^[A-Za-z][A-Za-z0-9 ]{0,10}[A-Za-z0-9]$/);
const anyCell: fc.Arbitrary<Cell> = fc.oneof(integerCell, floatCell, anyText, wordText, fc.constant(null));
const niceCell: fc.Arbitrary<Cell> = fc.oneof(integerCell, floatCell, wordText);

const scalarCase = fc.oneof(
  integerCell.map((v) => ({ type: 'integer' as const, rows: [[v]] })),
  floatCell.map((v) => ({ type: 'float' as const, rows: [[v]] })),
  // A text gold that is blank after trimming cannot be answered (empty answer is always wrong).
  anyText.filter((s) => s.trim() !== '').map((v) => ({ type: 'string' as const, rows: [[v]] })),
);
const listCase = (cell: fc.Arbitrary<Cell>) =>
  fc.array(cell, { minLength: 2, maxLength: 12 }).map((items) => ({ type: 'list' as const, rows: items.map((v) => [v]) }));
const tableCase = (cell: fc.Arbitrary<Cell>) =>
  fc
    .integer({ min: 2, max: 4 })
    .chain((width) => fc.array(fc.array(cell, { minLength: width, maxLength: width }), { minLength: 1, maxLength: 8 }))
    .map((rows) => ({ type: 'table' as const, rows }));
const anyCase = fc.oneof(scalarCase, listCase(anyCell), tableCase(anyCell));
const niceCase = fc.oneof(
  integerCell.map((v) => ({ type: 'integer' as const, rows: [[v]] })),
  floatCell.map((v) => ({ type: 'float' as const, rows: [[v]] })),
  wordText.map((v) => ({ type: 'string' as const, rows: [[v]] })),
  listCase(niceCell),
  tableCase(niceCell),
);

const wrappers: Array<(s: string) => string> = [
  (s) => `\`\`\`\n${s}\n\`\`\``,
  (s) => `\`\`\`text\n${s}\n\`\`\``,
  (s) => `Answer: ${s}`,
  (s) => `Final answer: ${s}`,
  (s) => `**Answer:** ${s}`,
  (s) => `The answer is ${s}`,
  (s) => `"${s}"`,
  (s) => `'${s}'`,
  (s) => `${s}.`,
  (s) => `<answer>${s}</answer>`,
  (s) => `\\boxed{${s}}`,
  (s) => `  \n${s}\n  `,
];
const inlineOnly = (s: string) => (s.includes('\n') || s.includes('`') ? s : `\`${s}\``);

function shuffle<T>(items: readonly T[], order: readonly number[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i -= 1) {
    const j = (order[i % order.length] ?? 0) % (i + 1);
    [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
  }
  return copy;
}

// ---- properties -------------------------------------------------------------
describe('verifyAnswer (properties)', () => {
  it('is reflexive: the formatted gold answer is correct for every type, whatever the cells hold', () => {
    fc.assert(
      fc.property(anyCase, ({ type, rows }) => {
        const g = gold(type, rows);
        for (const floatMatch of ['relative', 'precision'] as const) {
          const verdict = verifyAnswer(g.gold_answer, g, floatMatch);
          expect(verdict, `${floatMatch} ${JSON.stringify(g.gold_answer)}: ${verdict.reason}`).toMatchObject({ correct: true });
        }
      }),
      { numRuns: 600 },
    );
  });

  it('derives a type for which the formatted answer verifies (the dataset path)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }), fc.array(anyCell, { minLength: 1, maxLength: 18 }), (width, cells) => {
        const rows: Cell[][] = [];
        for (let i = 0; i + width <= cells.length; i += width) rows.push(cells.slice(i, i + width));
        fc.pre(rows.length > 0);
        const type = deriveAnswerType(Array.from({ length: width }, (_, i) => `c${i}`), rows);
        const text = formatGoldAnswer(type, rows);
        fc.pre(text.trim() !== '');
        expect(verifyAnswer(text, gold(type, rows)).correct).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('is order-insensitive for lists and tables', () => {
    fc.assert(
      fc.property(fc.oneof(listCase(anyCell), tableCase(anyCell)), fc.array(fc.nat(), { minLength: 1 }), ({ type, rows }, order) => {
        const answer = formatGoldAnswer(type, shuffle(rows, order));
        expect(verifyAnswer(answer, gold(type, rows)).correct).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('tolerates an LLM wrapping a correct answer', () => {
    fc.assert(
      fc.property(
        niceCase,
        fc.uniqueArray(fc.constantFrom(...wrappers.keys()), { minLength: 1, maxLength: 3 }),
        fc.boolean(),
        ({ type, rows }, chosen, inline) => {
          const g = gold(type, rows);
          let answer = inline ? inlineOnly(g.gold_answer) : g.gold_answer;
          for (const index of chosen) answer = (wrappers[index] as (s: string) => string)(answer);
          const verdict = verifyAnswer(answer, g);
          expect(verdict, `${JSON.stringify(answer)}: ${verdict.reason}`).toMatchObject({ correct: true });
        },
      ),
      { numRuns: 400 },
    );
  });

  it('coerces integer spellings: "25.0", "+25", "1,234", "2.5e1"', () => {
    fc.assert(
      fc.property(fc.integer({ min: -10_000_000, max: 10_000_000 }), (n) => {
        const g = gold('integer', [[n]]);
        const spellings = [`${n}.0`, `${n}.000`, n.toLocaleString('en-US'), `${n / 10}e1`, ` ${n} `];
        if (n >= 0) spellings.push(`+${n}`);
        for (const s of spellings) expect(verifyAnswer(s, g).correct, s).toBe(true);
        expect(verifyAnswer(`${n}.5`, g).correct).toBe(false);
      }),
    );
  });

  it('accepts a float within 1 % and rejects one just outside', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 1e-3, max: 1e9, noNaN: true }).filter((x) => !Number.isInteger(x)),
        fc.boolean(),
        fc.boolean(),
        (magnitude, negative, above) => {
          const g = negative ? -magnitude : magnitude;
          const direction = above ? 1 : -1;
          const inside = g * (1 + direction * 0.0099);
          const outside = g * (1 + direction * 0.0101);
          const target = gold('float', [[g]]);
          expect(verifyAnswer(String(inside), target).correct).toBe(true);
          expect(verifyAnswer(String(outside), target).correct).toBe(false);
        },
      ),
    );
  });

  it('rejects perturbed answers', () => {
    fc.assert(
      fc.property(niceCase, fc.nat(), (c, pick) => {
        const rows = c.rows.map((row) => [...row]);
        const r = pick % rows.length;
        const row = rows[r] as Cell[];
        const k = pick % row.length;
        const cell = row[k] as Cell;
        row[k] = typeof cell === 'number' ? (Number.isInteger(cell) ? cell + 1 : cell + Math.max(1, Math.abs(cell)) / 2) : `${String(cell)}qq`;
        const g = gold(c.type, c.rows);
        const perturbed = formatGoldAnswer(c.type, rows);
        fc.pre(!c.rows.some((other) => JSON.stringify(other) === JSON.stringify(rows[r])));
        expect(verifyAnswer(perturbed, g).correct).toBe(false);
      }),
      { numRuns: 400 },
    );
  });

  it('treats lists as multisets: missing, extra and swapped duplicates are wrong', () => {
    fc.assert(
      fc.property(fc.uniqueArray(wordText, { minLength: 2, maxLength: 8, selector: (s) => s.toLowerCase() }), (items) => {
        const g = gold('list', items.map((v) => [v]));
        expect(verifyAnswer(items.slice(1).join(', '), g).correct).toBe(false);
        expect(verifyAnswer([...items, items[0]].join(', '), g).correct).toBe(false);
        // Same size, same set of values, different multiplicities.
        expect(verifyAnswer([items[0], ...items.slice(0, -1)].join(', '), g).correct).toBe(false);
      }),
    );
  });

  it('rejects empty answers for every type', () => {
    fc.assert(
      fc.property(niceCase, fc.constantFrom('', '   ', '\n\t', '```\n```', 'Answer:', '**Answer:**', '<answer></answer>'), ({ type, rows }, empty) => {
        expect(verifyAnswer(empty, gold(type, rows))).toEqual({ correct: false, reason: 'empty answer' });
      }),
    );
  });
});

// ---- examples ---------------------------------------------------------------
describe('verifyAnswer (examples)', () => {
  it('explains mismatches briefly', () => {
    expect(verifyAnswer('24', gold('integer', [[25]]))).toEqual({ correct: false, reason: 'integer mismatch: expected 25, got 24' });
    expect(verifyAnswer('many', gold('integer', [[25]])).reason).toBe('integer mismatch: expected 25, got non-number "many"');
    expect(verifyAnswer('3.5', gold('float', [[3.14]])).reason).toBe('float mismatch: expected 3.14 (±1%), got 3.5');
    expect(verifyAnswer('Rome', gold('string', [['Paris']])).reason).toBe('string mismatch: expected "Paris", got "Rome"');
    expect(verifyAnswer('a', gold('list', [['a'], ['b']])).reason).toBe('list mismatch: expected 2 items, got 1');
    expect(verifyAnswer('a | 1\nb | 3', gold('table', [['a', 1], ['b', 2]])).reason).toBe('table mismatch: row "b | 3" is not an expected row');
  });

  it('compares strings trimmed and case-insensitively, numbers inside text cells numerically', () => {
    expect(verifyAnswer('  PARIS ', gold('string', [['Paris']])).correct).toBe(true);
    expect(verifyAnswer('25.0', gold('string', [['25']])).correct).toBe(true);
    // Non-canonical numeric text stays text: a zip code "02134" is not 2134.
    expect(verifyAnswer('2134', gold('string', [['02134']])).correct).toBe(false);
    expect(verifyAnswer('null', gold('string', [[null]])).correct).toBe(true);
  });

  it('handles zero with an absolute tolerance', () => {
    expect(verifyAnswer('0.0', gold('float', [[0]])).correct).toBe(true);
    expect(verifyAnswer('1e-12', gold('float', [[0]])).correct).toBe(true);
    expect(verifyAnswer('0.001', gold('float', [[0]])).correct).toBe(false);
  });

  it('reads lists written as bullets, JSON arrays, or with an Oxford "and"', () => {
    const g = gold('list', [['Alice'], ['Bob'], ['Carol']]);
    expect(verifyAnswer('- Carol\n- Alice\n- Bob', g).correct).toBe(true);
    expect(verifyAnswer('1. Bob\n2. Carol\n3. Alice', g).correct).toBe(true);
    expect(verifyAnswer('["Bob", "Alice", "Carol"]', g).correct).toBe(true);
    expect(verifyAnswer('Alice, Bob, and Carol', g).correct).toBe(true);
    expect(verifyAnswer('Alice, Bob', g).correct).toBe(false);
  });

  it('reads lists written "a, b and c" and "a and b" (no Oxford comma)', () => {
    const g = gold('list', [['Alice'], ['Bob'], ['Carol']]);
    expect(verifyAnswer('Alice, Bob and Carol', g).correct).toBe(true);
    expect(verifyAnswer('Carol, Alice AND\tBob.', g).correct).toBe(true);
    expect(verifyAnswer('Answer: Alice, Bob and Carol', g).correct).toBe(true);
    expect(verifyAnswer('Alice and Bob and Carol', g).correct).toBe(false);
    expect(verifyAnswer('Alice, Bob and Dave', g).correct).toBe(false);
    expect(verifyAnswer('Paris and London', gold('list', [['London'], ['Paris']])).correct).toBe(true);
    // An item that holds " and " still matches as one item, with or without the final "and".
    const departments = gold('list', [['Research and Development'], ['Sales'], ['Marketing']]);
    expect(verifyAnswer('Sales, Research and Development, Marketing', departments).correct).toBe(true);
    expect(verifyAnswer('Sales, Marketing and Research and Development', departments).correct).toBe(true);
    expect(verifyAnswer('Sales, Research and Development and Marketing', departments).correct).toBe(true);
    expect(verifyAnswer('Sales, Marketing, and Research and Development', departments).correct).toBe(true);
  });

  it('keeps list items that contain commas intact', () => {
    const g = gold('list', [['Smith, John'], ['Doe, Jane']]);
    expect(g.gold_answer).toBe('Smith, John\nDoe, Jane');
    expect(verifyAnswer('Doe, Jane\nSmith, John', g).correct).toBe(true);
    expect(verifyAnswer('Smith, John, Doe, Jane', g).correct).toBe(false);
  });

  it('reads markdown tables, comma-separated rows and a header that repeats the columns', () => {
    const g = gold('table', [['Alice', 30], ['Bob', 25.5]], ['name', 'age']);
    expect(verifyAnswer('| name | age |\n|---|---|\n| Bob | 25.5 |\n| Alice | 30 |', g).correct).toBe(true);
    expect(verifyAnswer('Alice, 30\nBob, 25.5', g).correct).toBe(true);
    expect(verifyAnswer('Alice | 30\nBob | 25.4', g).correct).toBe(true); // float cell within 1 %
    expect(verifyAnswer('Alice | 31\nBob | 25.5', g).correct).toBe(false); // integer cell exact
    expect(verifyAnswer('Alice | 30 | x\nBob | 25.5 | y', g).reason).toBe('table mismatch: row 1 has 3 cells, expected 2');
  });

  it('does not extract a value from a sentence', () => {
    expect(verifyAnswer('There are 25 employees', gold('integer', [[25]])).correct).toBe(false);
  });

  it('falls back to gold_answer when gold_rows are absent', () => {
    const g: GoldAnswer = { answer_type: 'list', gold_answer: 'a, b', gold_rows: [], gold_columns: ['x'] };
    expect(verifyAnswer('b, a', g).correct).toBe(true);
    const none: GoldAnswer = { answer_type: 'list', gold_answer: '', gold_rows: [], gold_columns: ['x'] };
    expect(verifyAnswer('a', none)).toEqual({ correct: false, reason: 'no gold items' });
  });
});

describe('empty gold results', () => {
  const emptyGold = { answer_type: 'list' as const, gold_answer: formatGoldAnswer('list', []), gold_rows: [], gold_columns: ['name'] };
  it('are answered by saying there is nothing, never by an empty string', () => {
    expect(emptyGold.gold_answer).toBe('none');
    for (const answer of ['none', 'None.', 'Answer: no rows', '```\n[]\n```', 'No results', 'EMPTY']) {
      expect(verifyAnswer(answer, emptyGold).correct, answer).toBe(true);
    }
    for (const answer of ['', '0', 'Alice', 'none, Bob', 'NULL?']) {
      expect(verifyAnswer(answer, emptyGold).correct, answer).toBe(false);
    }
  });
  it('do not change a gold NULL cell, which is a row', () => {
    const nullGold = { answer_type: 'string' as const, gold_answer: 'NULL', gold_rows: [[null]], gold_columns: ['x'] };
    expect(verifyAnswer('NULL', nullGold).correct).toBe(true);
    expect(verifyAnswer('no rows', nullGold).correct).toBe(false);
  });
});

describe('repeated checks of one question', () => {
  it('give the same verdicts when the prepared gold is reused', () => {
    const list = { answer_type: 'list' as const, gold_answer: 'a, b, b', gold_rows: [['a'], ['b'], ['b']], gold_columns: ['x'] };
    const table = { answer_type: 'table' as const, gold_answer: '1 | x\n2 | y', gold_rows: [[1, 'x'], [2, 'y']], gold_columns: ['n', 's'] };
    for (let round = 0; round < 3; round++) {
      expect(verifyAnswer('b, a, b', list).correct).toBe(true);
      expect(verifyAnswer('a, b', list).correct).toBe(false);
      expect(verifyAnswer('a, a, b', list).correct).toBe(false);
      expect(verifyAnswer('2 | y\n1 | x', table).correct).toBe(true);
      expect(verifyAnswer('2 | y\n1 | z', table).correct).toBe(false);
    }
  });
});
