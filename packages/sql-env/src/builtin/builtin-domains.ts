import type { DomainSpec } from './domain-spec.ts';
import { clinic } from './domains/clinic.ts';
import { musicStreaming } from './domains/music-streaming.ts';
import { retailShop } from './domains/retail-shop.ts';
import { university } from './domains/university.ts';

/** The built-in databases, in the order they appear in the question files. */
export const BUILTIN_DOMAINS: readonly DomainSpec[] = [retailShop, university, clinic, musicStreaming];
