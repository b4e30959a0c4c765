import type { Mulberry32 } from '@sqlenv/shared';

/** Word lists shared by the domains. Names are varied on purpose (apostrophes, hyphens, accents). */

export const FIRST_NAMES = [
  'Olivia', 'Liam', 'Emma', 'Noah', 'Ava', 'Lucas', 'Sofia', 'Mateo', 'Mia', 'Ethan',
  'Amelia', 'Leo', 'Isabella', 'Hugo', 'Chloe', 'Oscar', 'Zoe', 'Arjun', 'Priya', 'Wei',
  'Mei', 'Hiroshi', 'Yuki', 'Fatima', 'Omar', 'Aisha', 'Kwame', 'Amara', 'Lars', 'Ingrid',
  'Mateus', 'Camila', 'Diego', 'Lucia', 'Pierre', 'Camille', 'Jonas', 'Lena', 'Sean', 'Niamh',
  'Grace', 'Daniel', 'Hannah', 'Samuel', 'Nora', 'Elias', 'Ines', 'Tomás', 'Anika', 'Raj',
] as const;

export const LAST_NAMES = [
  'Smith', 'Johnson', 'Garcia', 'Müller', 'Rossi', 'Dubois', 'Kowalski', 'Nguyen', 'Kim', 'Patel',
  'Singh', 'Tanaka', 'Sato', 'Chen', 'Wang', "O'Brien", 'Murphy', 'Andersen', 'Larsen', 'Silva',
  'Santos', 'Fernandez', 'Lopez', 'Martin', 'Bernard', 'Schmidt', 'Fischer', 'Novak', 'Horvat', 'Ivanova',
  'Okafor', 'Mensah', 'Haddad', 'Khan', 'Ali', 'Cohen', 'Levi', 'Walker', 'Taylor', 'Brown',
  'Wilson', 'Evans', 'Thomas', 'Roberts', 'Clarke', 'Lewis', 'Young', 'Hughes', 'Price', 'Bennett-Ross',
] as const;

/** A city and its country, with a weight: bigger cities get more people. */
export const CITIES: readonly (readonly [city: string, country: string, weight: number])[] = [
  ['London', 'United Kingdom', 6], ['Manchester', 'United Kingdom', 3], ['Edinburgh', 'United Kingdom', 2],
  ['Paris', 'France', 5], ['Lyon', 'France', 2], ['Berlin', 'Germany', 5], ['Munich', 'Germany', 3],
  ['Hamburg', 'Germany', 2], ['Madrid', 'Spain', 4], ['Barcelona', 'Spain', 3], ['Rome', 'Italy', 3],
  ['Milan', 'Italy', 3], ['Amsterdam', 'Netherlands', 3], ['Dublin', 'Ireland', 2], ['Lisbon', 'Portugal', 2],
  ['Vienna', 'Austria', 2], ['Stockholm', 'Sweden', 2], ['Copenhagen', 'Denmark', 2], ['Toronto', 'Canada', 3],
  ['New York', 'United States', 5], ['Chicago', 'United States', 3], ['Austin', 'United States', 2],
];

/** The clinic's patient towns, with weights. */
export const TOWNS: readonly (readonly [town: string, weight: number])[] = [
  ['Riverton', 5], ['Lakeside', 4], ['Oakridge', 3], ['Hillcrest', 3], ['Fairview', 2], ['Maplewood', 2], ['Brookside', 1],
];

/** Words of album, track and band titles ("Velvet Fire", "Rain of Foxes", "The Neon Owls"). */
export const TITLE_ADJECTIVES = ['Velvet', 'Neon', 'Silver', 'Midnight', 'Electric', 'Golden', 'Hollow', 'Crimson', 'Paper', 'Wild', 'Quiet', 'Northern', 'Broken', 'Lucky', 'Distant', 'Burning', 'Frozen', 'Little'] as const;
export const TITLE_NOUNS = ['Foxes', 'Harbour', 'Lanterns', 'Echoes', 'Rivers', 'Satellites', 'Owls', 'Tides', 'Machines', 'Gardens', 'Wolves', 'Parade', 'Mirrors', 'Comets', 'Bridges', 'Streets', 'Hearts', 'Skies'] as const;
export const TITLE_SINGULAR = ['Fire', 'Rain', 'Light', 'Summer', 'Heart', 'River', 'Dream', 'Night', 'Road', 'Ocean', 'Signal', 'Shadow', 'Morning', 'Storm', 'Home', 'Gold', 'Glass', 'Winter'] as const;

/**
 * The value pools the domains draw names and places from. The standard pools are the word lists
 * above; `freshVocabulary` makes synthetic ones, new for every seed, so that a model trained on
 * many generated databases meets names it has never seen and can only get them right by copying
 * them from its context.
 */
export interface Vocabulary {
  firstNames: readonly string[];
  lastNames: readonly string[];
  cities: readonly (readonly [city: string, country: string, weight: number])[];
  towns: readonly (readonly [town: string, weight: number])[];
  titleAdjectives: readonly string[];
  titleNouns: readonly string[];
  titleSingular: readonly string[];
  /** A brand put before each product's name ("Varen Chef Knife"); null: the catalogue's names as they are. */
  productBrands: readonly string[] | null;
}

export const STANDARD_VOCABULARY: Vocabulary = {
  firstNames: FIRST_NAMES,
  lastNames: LAST_NAMES,
  cities: CITIES,
  towns: TOWNS,
  titleAdjectives: TITLE_ADJECTIVES,
  titleNouns: TITLE_NOUNS,
  titleSingular: TITLE_SINGULAR,
  productBrands: null,
};

const ONSETS = ['', 'b', 'br', 'c', 'ch', 'd', 'dr', 'f', 'fl', 'g', 'gr', 'h', 'j', 'k', 'kr', 'l', 'm', 'n', 'p', 'pr', 'qu', 'r', 's', 'sh', 'sk', 'st', 't', 'th', 'tr', 'v', 'w', 'y', 'z'] as const;
const VOWELS = ['a', 'e', 'i', 'o', 'u', 'a', 'e', 'i', 'o', 'ai', 'ea', 'ou', 'ie', 'y'] as const;
const ACCENTED: Readonly<Record<string, string>> = { a: 'á', e: 'é', o: 'ö', u: 'ü' };
const CODAS = ['', '', '', 'n', 'r', 'l', 's', 'm', 'k', 'th', 'nd', 'rt', 'x', 'sh', 'ck'] as const;

/** A pronounceable made-up word of `syllables` syllables, capitalised ("Brakel", "Vouthin"). */
function syntheticWord(rng: Mulberry32, syllables: number): string {
  let word = '';
  for (let i = 0; i < syllables; i++) word += rng.pick(ONSETS) + rng.pick(VOWELS) + (i === syllables - 1 || rng.chance(0.3) ? rng.pick(CODAS) : '');
  // About one word in twenty carries an accent, as a few standard names do (Müller, Tomás).
  if (rng.chance(0.05)) word = word.replace(/[aeou](?=[^aeou]*$)/, (v) => ACCENTED[v] ?? v);
  return word.charAt(0).toUpperCase() + word.slice(1);
}

/** `count` distinct made-up words of 2–3 syllables; `decorate` may reshape some (apostrophes, hyphens). */
function syntheticWords(rng: Mulberry32, count: number, decorate: (word: string) => string = (w) => w): string[] {
  const words = new Set<string>();
  while (words.size < count) words.add(decorate(syntheticWord(rng, rng.chance(0.6) ? 2 : 3)));
  return [...words];
}

/**
 * Synthetic value pools drawn from `rng`: 1,000 first and 1,000 last names (a few with
 * apostrophes, hyphens and accents, as the standard ones have), 60 cities in 15 countries, 7 towns
 * with the standard towns' weights, 40 words of each title kind and 80 product brands. Pools this
 * large, made anew for each seed, make a value rarely recur across generated databases.
 */
export function freshVocabulary(rng: Mulberry32): Vocabulary {
  const countries = syntheticWords(rng.fork('countries'), 15, (w) => (w.endsWith('a') ? w : `${w}ia`));
  const cityRng = rng.fork('cities');
  const lastRng = rng.fork('last-names');
  return {
    firstNames: syntheticWords(rng.fork('first-names'), 1000),
    lastNames: syntheticWords(lastRng, 1000, (w) => {
      const r = lastRng.float();
      return r < 0.03 ? `O'${w}` : r < 0.06 ? `${w}-${syntheticWord(lastRng, 2)}` : w;
    }),
    cities: syntheticWords(cityRng, 60).map((city) => [city, cityRng.pick(countries), cityRng.int(1, 6)] as const),
    towns: syntheticWords(rng.fork('towns'), TOWNS.length).map((town, i) => [town, (TOWNS[i] as (typeof TOWNS)[number])[1]] as const),
    titleAdjectives: syntheticWords(rng.fork('title-adjectives'), 40),
    titleNouns: syntheticWords(rng.fork('title-nouns'), 40, (w) => (w.endsWith('s') ? w : `${w}s`)),
    titleSingular: syntheticWords(rng.fork('title-singular'), 40),
    productBrands: syntheticWords(rng.fork('brands'), 80),
  };
}

/**
 * A supply of people with unique full names: each call returns a `[first, last]`
 * pair not returned before (2,500 combinations with the standard pools; generation uses a few hundred).
 */
export function nameSupply(rng: Mulberry32, vocabulary: Vocabulary = STANDARD_VOCABULARY): () => [string, string] {
  const seen = new Set<string>();
  return () => {
    for (;;) {
      const first = rng.pick(vocabulary.firstNames);
      const last = rng.pick(vocabulary.lastNames);
      const key = `${first} ${last}`;
      if (seen.has(key)) continue;
      seen.add(key);
      return [first, last];
    }
  };
}

/** `count` people with unique full names. */
export function uniqueNames(rng: Mulberry32, count: number, vocabulary: Vocabulary = STANDARD_VOCABULARY): [string, string][] {
  const next = nameSupply(rng, vocabulary);
  return Array.from({ length: count }, () => next());
}

/** An e-mail address derived from a name: lowercase ASCII, apostrophes and accents removed. */
export function emailFor(first: string, last: string, domain: string, serial: number): string {
  const ascii = (text: string): string =>
    text.normalize('NFD').replace(/[^A-Za-z-]/g, '').toLowerCase();
  return `${ascii(first)}.${ascii(last)}${serial % 7 === 0 ? String(serial) : ''}@${domain}`;
}

/** A country as it reads inside a sentence: "the United States", "France". */
export function inCountry(country: string): string {
  return /^(United|Netherlands|Czech|Philippines)/.test(country) ? `the ${country}` : country;
}
