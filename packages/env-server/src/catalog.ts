import { z } from 'zod';
import { fastResetOptions, ResetOptionsSchema, type ResetOptions } from '@sqlenv/protocol';
import type { ServedDataset } from './env-runtime.ts';
import { toValidationIssues, validationError } from './error-mapping.ts';

/** The /web/catalog document: what a person may pick from. Ids and question text only. */
export const CatalogDocumentSchema = z.strictObject({
  dataset: z.string(),
  databases: z.array(z.string()),
  questions: z.array(z.strictObject({ question_id: z.string(), db_id: z.string(), difficulty: z.string(), split: z.string(), question: z.string() })),
});
export type CatalogDocument = z.infer<typeof CatalogDocumentSchema>;

/**
 * What clients may choose from: the loaded dataset's database and question
 * ids. Reset options naming anything else are rejected here with a clear
 * message (no path or file name is ever looked up).
 */
export class Catalog {
  private readonly dataset: ServedDataset;
  private readonly questionDb = new Map<string, string>();
  private document: CatalogDocument | undefined;

  constructor(dataset: ServedDataset) {
    this.dataset = dataset;
    for (const q of dataset.questions) this.questionDb.set(q.question_id, q.database_name);
  }

  /** Parse reset kwargs (extra keys allowed, as in OpenEnv) and check ids against the catalog. */
  parseResetOptions(raw: Record<string, unknown>, locPrefix: readonly string[]): ResetOptions {
    let options = fastResetOptions(raw);
    if (options === undefined) {
      const parsed = ResetOptionsSchema.safeParse(raw);
      if (!parsed.success) throw validationError('Invalid reset options', toValidationIssues(parsed.error, locPrefix));
      options = parsed.data;
    }
    if (options.db_id !== undefined && !this.dataset.databases.has(options.db_id)) {
      throw validationError(`Unknown db_id '${options.db_id}': choose one of the loaded databases (see /web/catalog)`, [
        { loc: [...locPrefix, 'db_id'], msg: `unknown db_id '${options.db_id}'`, type: 'unknown_id' },
      ]);
    }
    if (options.question_id !== undefined) {
      const db = this.questionDb.get(options.question_id);
      if (db === undefined) {
        throw validationError(`Unknown question_id '${options.question_id}': choose one of the loaded questions (see /web/catalog)`, [
          { loc: [...locPrefix, 'question_id'], msg: `unknown question_id '${options.question_id}'`, type: 'unknown_id' },
        ]);
      }
      if (options.db_id !== undefined && options.db_id !== db) {
        throw validationError(`question_id '${options.question_id}' belongs to db_id '${db}', not '${options.db_id}'`, [
          { loc: [...locPrefix, 'db_id'], msg: 'db_id does not match the question', type: 'mismatch' },
        ]);
      }
    }
    return options;
  }

  toDocument(): CatalogDocument {
    this.document ??= {
      dataset: this.dataset.name,
      databases: [...this.dataset.databases.keys()].sort(),
      questions: this.dataset.questions.map((q) => ({
        question_id: q.question_id,
        db_id: q.database_name,
        difficulty: q.difficulty,
        split: q.split,
        question: q.question_text,
      })),
    };
    return this.document;
  }
}
