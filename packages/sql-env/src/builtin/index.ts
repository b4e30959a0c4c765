import { BUILTIN_DOMAINS } from './builtin-domains.ts';

export {
  generateBuiltinDataset,
  BuiltinDatasetOptionsSchema,
  DEFAULT_BUILTIN_SEED,
  BUILTIN_GENERATOR_VERSION,
  type BuiltinDatasetOptions,
  type BuiltinDatasetSummary,
  type BuiltinDomainSummary,
} from './generate-builtin-dataset.ts';
export { builtinDatasetDir, builtinCacheName, readBuiltinManifest } from './builtin-dataset-dir.ts';

/** What a built-in domain contains, for docs and `sqlenv datasets` (counts: see the manifest). */
export interface BuiltinDomainInfo {
  dbId: string;
  title: string;
  summary: string;
  tables: string[];
  templates: number;
}

export const builtinDomains: readonly BuiltinDomainInfo[] = BUILTIN_DOMAINS.map((domain) => ({
  dbId: domain.dbId,
  title: domain.title,
  summary: domain.summary,
  tables: domain.tables.map((table) => table.name),
  templates: domain.templates.length,
}));
