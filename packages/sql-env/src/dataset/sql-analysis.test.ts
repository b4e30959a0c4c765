import { describe, expect, it } from 'vitest';
import { deriveDifficulty, extraSelectCount, tablesInvolved } from './sql-analysis.ts';

const tables = ['Student', 'Has_Allergy', 'Allergy_Type', 'Order Items', 'select'];

describe('tablesInvolved', () => {
  it('finds FROM and JOIN targets, case-insensitively, in the database spelling', () => {
    const sql = 'SELECT T1.fname FROM student AS T1 JOIN has_allergy AS T2 ON T1.stuid = T2.stuid WHERE T2.allergy = "Cat"';
    expect(tablesInvolved(sql, tables)).toEqual(['Student', 'Has_Allergy']);
  });

  it('reads comma-separated FROM lists with and without AS', () => {
    expect(tablesInvolved('SELECT * FROM Student s, Allergy_Type AS a, Has_Allergy WHERE 1', tables)).toEqual(['Student', 'Allergy_Type', 'Has_Allergy']);
  });

  it('visits subqueries and set operations', () => {
    const sql = 'SELECT stuid FROM Student WHERE stuid NOT IN (SELECT stuid FROM Has_Allergy) EXCEPT SELECT 1 FROM allergy_type';
    expect(tablesInvolved(sql, tables)).toEqual(['Student', 'Has_Allergy', 'Allergy_Type']);
  });

  it('understands quoted names and ignores names inside strings and comments', () => {
    const sql = `SELECT 'FROM Student' FROM "Order Items" -- FROM Has_Allergy\n JOIN [select] ON 1 /* JOIN Allergy_Type */`;
    expect(tablesInvolved(sql, tables)).toEqual(['Order Items', 'select']);
  });

  it('leaves out names that are not tables of the database', () => {
    expect(tablesInvolved('WITH x AS (SELECT 1) SELECT * FROM x JOIN main.Student', tables)).toEqual(['Student']);
  });
});

describe('difficulty', () => {
  it('counts extra SELECTs (subqueries and set-operation branches)', () => {
    expect(extraSelectCount('SELECT count(*) FROM a')).toBe(0);
    expect(extraSelectCount("SELECT a FROM t WHERE b = 'select' UNION SELECT a FROM u")).toBe(1);
  });

  it('grades by tables and nesting', () => {
    expect(deriveDifficulty(1, 0)).toBe('easy');
    expect(deriveDifficulty(2, 0)).toBe('easy');
    expect(deriveDifficulty(3, 0)).toBe('medium');
    expect(deriveDifficulty(1, 1)).toBe('medium');
    expect(deriveDifficulty(3, 1)).toBe('hard');
    expect(deriveDifficulty(1, 2)).toBe('hard');
    expect(deriveDifficulty(4, 0)).toBe('hard');
  });
});
