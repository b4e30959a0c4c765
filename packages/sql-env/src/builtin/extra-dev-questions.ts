import type Database from 'better-sqlite3';
import type { DomainSpec } from './domain-spec.ts';
import { buildQuestions, type GeneratedQuestion } from './question-builder.ts';
import type { Mulberry32 } from '@sqlenv/shared';

/**
 * More held-out questions for a larger dev split: for every template with questions in dev, up to
 * `perInstance` times as many new draws (other parameter values, same database), so the larger dev
 * split keeps the standard one's mix of templates. A draw whose query is in `exclude` (every
 * question already written: train, dev and any extra training draws) is redrawn, so no extra dev
 * question is ever a training question. Parameterless templates have no other instance and add none.
 */
export function buildExtraDevQuestions(
  db: Database.Database,
  domain: DomainSpec,
  rng: Mulberry32,
  dev: readonly GeneratedQuestion[],
  exclude: ReadonlySet<string>,
  perInstance: number,
): GeneratedQuestion[] {
  const devPerTemplate = new Map<string, number>();
  for (const q of dev) devPerTemplate.set(q.templateId, (devPerTemplate.get(q.templateId) ?? 0) + 1);
  // The dev templates only, each wanting as many instances as it has dev questions (× perInstance below).
  const templates = domain.templates.flatMap((t) => {
    const count = devPerTemplate.get(t.id);
    return count === undefined ? [] : [{ ...t, instances: count }];
  });
  return buildQuestions(db, { ...domain, templates }, rng, { instancesPerTemplate: (n) => n * perInstance, exclude });
}
