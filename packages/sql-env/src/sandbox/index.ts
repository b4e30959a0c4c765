export { SqlExecutor, type QueryOptions, type ExecutorStats } from './sql-executor.ts';
export { ExecutorConfigSchema, QueryLimitsSchema, type ExecutorConfig, type QueryLimits } from './executor-config.ts';
export { QueryRunner, assertReadOnlyStatement, type QueryResult } from './query-runner.ts';
export { validateSql, type ValidatedSql, type ValidateSqlOptions } from './sql-validator.ts';
export { tokenizeSql, TokenKind, type SqlToken } from './sql-tokenizer.ts';
export { readSchema, quoteIdentifier, openReadonly, type TableInfo, type ColumnInfo } from './read-schema.ts';
