/**
 * Test fixture (tests/temp-dir-trust.test.ts): start an executor in a fresh
 * process (whose TMPDIR the test chooses), run one query, print the result
 * and the child entry it started from, and exit.
 *   node --import tsx one-query.ts <dbPath>
 */
import { fileURLToPath } from 'node:url';
import { executorChildEntry } from '../child-entry.ts';
import { SqlExecutor } from '../sql-executor.ts';

const dbPath = process.argv[2] ?? '';
const executor = new SqlExecutor({ poolSize: 1, spareChildren: 0, inProcessMaxMs: 0 });
try {
  const result = await executor.query(dbPath, 'SELECT count(*) AS n FROM singer');
  const entry = executorChildEntry();
  process.stdout.write(`${JSON.stringify({ rows: result.rows, bundled: entry.bundled, module: fileURLToPath(entry.module), fallbackReason: entry.fallbackReason ?? null })}\n`);
} catch (error) {
  process.stdout.write(`${JSON.stringify({ error: error instanceof Error ? error.message : String(error) })}\n`);
} finally {
  await executor.close();
}
