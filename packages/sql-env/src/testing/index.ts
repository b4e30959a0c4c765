// Test helpers of @sqlenv/sql-env, for its own tests and for tests/ and bench/ (`@sqlenv/sql-env/testing`).
export { writeTinySpider, tinyQuestions } from './tiny-spider.ts';
export { makeTestDb } from '../sandbox/testing/make-test-db.ts';
export { executorChildEntry } from '../sandbox/child-entry.ts';
export { prepareBuiltinDataset } from './builtin-dataset.ts';
