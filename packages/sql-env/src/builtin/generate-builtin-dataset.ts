import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { AppError, ErrorCode, formatZodIssues, appendAll, deriveSeed, Mulberry32 } from '@sqlenv/shared';
import type { DomainSpec } from './domain-spec.ts';
import { BUILTIN_DOMAINS } from './builtin-domains.ts';
import { buildExtraDevQuestions } from './extra-dev-questions.ts';
import { buildQuestions, type GeneratedQuestion } from './question-builder.ts';
import { writeDatabase } from './sqlite-writer.ts';
import { freshVocabulary, STANDARD_VOCABULARY, type Vocabulary } from './vocabulary.ts';
import { spiderTablesEntry } from './tables-json.ts';

/**
 * Bump whenever generated content changes (schemas, value lists, templates,
 * split rule): it is part of the cache key, so stale caches are not reused.
 */
export const BUILTIN_GENERATOR_VERSION = 1;

/** Fraction of each domain's questions that go to dev.json. */
const DEV_FRACTION = 0.2;

export const BuiltinDatasetOptionsSchema = z.strictObject({
  /** Directory to write the Spider-layout dataset into (created if missing). */
  outDir: z.string().min(1),
  /** PRNG seed (unsigned 32-bit): same seed, same dataset. */
  seed: z.number().int().min(0).max(0xffff_ffff).default(20_240_601),
  /**
   * Extra training questions: for each template, up to this many times its instance count of
   * further draws from the same databases, added to train_spider.json only. A draw whose query
   * is already in the dataset (train or dev) is rejected, so dev questions stay unseen. 0 (the
   * default) writes exactly the standard dataset. Used to pre-train the demo model, which needs
   * more than two examples per template to learn to fill a template's slots.
   */
  extraTrainPerInstance: z.number().int().min(0).max(100).default(0),
  /**
   * train_spider.json holds the extra draws only, not the standard train questions: data to
   * pre-train on that leaves the standard train split's instances (as well as dev's) unseen, so a
   * later RL phase on the standard train split meets new instances of known templates.
   */
  extraTrainOnly: z.boolean().default(false),
  /**
   * Extra held-out questions: for each template in dev, up to this many times its dev count of new
   * draws from the same databases, appended to dev.json (the standard dev questions stay a prefix).
   * A draw already in the dataset (train, dev, extra train) is rejected, so none is trained on by a
   * run on this dataset; a model pre-trained on extra train draws of the same seed has not seen
   * them only if this dataset was made with the same extraTrainPerInstance. 0 (the default) writes
   * the standard dev split.
   */
  extraDevPerInstance: z.number().int().min(0).max(100).default(0),
  /**
   * Names and places from synthetic pools made anew from the seed (`freshVocabulary`) instead of
   * the standard word lists: every seed gives databases whose people, cities, towns, titles and
   * product names a model has almost surely not seen, for training data that cannot be memorised.
   * Off by default; the standard dataset is unchanged by this option's existence.
   */
  freshValues: z.boolean().default(false),
});
export type BuiltinDatasetOptions = z.input<typeof BuiltinDatasetOptionsSchema>;

export const DEFAULT_BUILTIN_SEED = BuiltinDatasetOptionsSchema.shape.seed.parse(undefined);

export interface BuiltinDomainSummary {
  dbId: string;
  title: string;
  summary: string;
  tables: { name: string; rows: number }[];
  questions: { train: number; dev: number };
}

export interface BuiltinDatasetSummary {
  generatorVersion: number;
  seed: number;
  /** Present when extra training draws were added (see BuiltinDatasetOptionsSchema). */
  extraTrainPerInstance?: number;
  /** Present (true) when train_spider.json holds the extra draws only. */
  extraTrainOnly?: boolean;
  /** Present when extra dev draws were added (see BuiltinDatasetOptionsSchema). */
  extraDevPerInstance?: number;
  /** Present (true) when names and places come from synthetic pools (see BuiltinDatasetOptionsSchema). */
  freshValues?: boolean;
  domains: BuiltinDomainSummary[];
}

/** Spider's question record: exactly these three fields. */
interface SpiderQuestion {
  db_id: string;
  question: string;
  query: string;
}

function toSpider(question: GeneratedQuestion): SpiderQuestion {
  return { db_id: question.db_id, question: question.question, query: question.query };
}

/** A deterministic ~80/20 split that keeps each split in generation order. */
function splitQuestions(questions: readonly GeneratedQuestion[], rng: Mulberry32): { train: GeneratedQuestion[]; dev: GeneratedQuestion[] } {
  const devCount = Math.round(questions.length * DEV_FRACTION);
  const devIndices = new Set(rng.shuffle(questions.map((_, index) => index)).slice(0, devCount));
  return {
    train: questions.filter((_, index) => !devIndices.has(index)),
    dev: questions.filter((_, index) => devIndices.has(index)),
  };
}

async function generateDomain(
  domain: DomainSpec,
  outDir: string,
  seed: number,
  extraTrainPerInstance: number,
  extraDevPerInstance: number,
  vocabulary: Vocabulary,
): Promise<{ summary: BuiltinDomainSummary; train: GeneratedQuestion[]; dev: GeneratedQuestion[]; extra: GeneratedQuestion[]; extraDev: GeneratedQuestion[] }> {
  const rng = new Mulberry32(deriveSeed(seed, domain.dbId));
  const rows = domain.generateRows(rng.fork('rows'), vocabulary);
  const dbDir = join(outDir, 'database', domain.dbId);
  await mkdir(dbDir, { recursive: true });
  const finalPath = join(dbDir, `${domain.dbId}.sqlite`);
  const tempPath = `${finalPath}.partial`;
  await rm(tempPath, { force: true });
  let questions: GeneratedQuestion[];
  let extra: GeneratedQuestion[] = [];
  let extraDev: GeneratedQuestion[] = [];
  try {
    const db = writeDatabase(tempPath, domain.tables, rows);
    try {
      questions = buildQuestions(db, domain, rng.fork('questions'));
      if (extraTrainPerInstance > 0) {
        // A separate stream: the standard questions and split are the same with or without extras.
        extra = buildQuestions(db, domain, rng.fork('extra-train'), {
          instancesPerTemplate: (n) => n * extraTrainPerInstance,
          exclude: new Set(questions.map((q) => q.query)),
        });
      }
      if (extraDevPerInstance > 0) {
        // Its own stream too; the split is a pure function of the questions and its fork, so the same as below.
        const standardDev = splitQuestions(questions, rng.fork('split')).dev;
        extraDev = buildExtraDevQuestions(db, domain, rng.fork('extra-dev'), standardDev, new Set([...questions, ...extra].map((q) => q.query)), extraDevPerInstance);
      }
    } finally {
      db.close();
    }
    await rename(tempPath, finalPath);
  } catch (error) {
    await rm(tempPath, { force: true });
    throw error;
  }
  const { train, dev } = splitQuestions(questions, rng.fork('split'));
  return {
    summary: {
      dbId: domain.dbId,
      title: domain.title,
      summary: domain.summary,
      tables: domain.tables.map((table) => ({ name: table.name, rows: rows.get(table.name)?.length ?? 0 })),
      questions: { train: train.length + extra.length, dev: dev.length + extraDev.length },
    },
    train,
    dev,
    extra,
    extraDev,
  };
}

function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

/**
 * Writes the built-in dataset in Spider's layout: database/<db_id>/<db_id>.sqlite,
 * train_spider.json, dev.json, tables.json, plus builtin-manifest.json with
 * the counts. Every gold query has been run on its database and returns a
 * non-empty result of the intended answer shape.
 */
export async function generateBuiltinDataset(options: BuiltinDatasetOptions): Promise<BuiltinDatasetSummary> {
  const parsed = BuiltinDatasetOptionsSchema.safeParse(options);
  if (!parsed.success) {
    throw new AppError(ErrorCode.VALIDATION, `invalid built-in dataset options: ${formatZodIssues(parsed.error)}`);
  }
  const { outDir, seed, extraTrainPerInstance, extraTrainOnly, extraDevPerInstance, freshValues } = parsed.data;
  // Its own stream: the rows' draws stay aligned with the standard dataset's for the same seed.
  const vocabulary = freshValues ? freshVocabulary(new Mulberry32(deriveSeed(seed, 'fresh-vocabulary'))) : STANDARD_VOCABULARY;
  if (extraTrainOnly && extraTrainPerInstance === 0) throw new AppError(ErrorCode.VALIDATION, 'invalid built-in dataset options: extraTrainOnly needs extraTrainPerInstance > 0');
  await mkdir(outDir, { recursive: true });
  const train: SpiderQuestion[] = [];
  const dev: SpiderQuestion[] = [];
  const extra: SpiderQuestion[] = [];
  const extraDev: SpiderQuestion[] = [];
  const domains: BuiltinDomainSummary[] = [];
  for (const domain of BUILTIN_DOMAINS) {
    const generated = await generateDomain(domain, outDir, seed, extraTrainPerInstance, extraDevPerInstance, vocabulary);
    appendAll(train, generated.train.map(toSpider));
    appendAll(dev, generated.dev.map(toSpider));
    appendAll(extra, generated.extra.map(toSpider));
    appendAll(extraDev, generated.extraDev.map(toSpider));
    domains.push(generated.summary);
  }
  if (extraTrainOnly) for (const domain of domains) domain.questions.train = extra.filter((q) => q.db_id === domain.dbId).length;
  const summary: BuiltinDatasetSummary = {
    generatorVersion: BUILTIN_GENERATOR_VERSION,
    seed,
    ...(extraTrainPerInstance > 0 ? { extraTrainPerInstance } : {}),
    ...(extraTrainOnly ? { extraTrainOnly } : {}),
    ...(extraDevPerInstance > 0 ? { extraDevPerInstance } : {}),
    ...(freshValues ? { freshValues } : {}),
    domains,
  };
  await writeFile(join(outDir, 'tables.json'), json(BUILTIN_DOMAINS.map(spiderTablesEntry)));
  // Extra draws after every standard question, so the standard train split is a prefix (or extras alone).
  await writeFile(join(outDir, 'train_spider.json'), json(extraTrainOnly ? extra : [...train, ...extra]));
  // Likewise the extra dev draws: the standard dev split is a prefix of the larger one.
  await writeFile(join(outDir, 'dev.json'), json([...dev, ...extraDev]));
  await writeFile(join(outDir, 'builtin-manifest.json'), json(summary));
  return summary;
}
