import type { Rng } from './rng.ts';

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

/**
 * A supply of people with unique full names: each call returns a `[first, last]`
 * pair not returned before (2,500 combinations; generation uses a few hundred).
 */
export function nameSupply(rng: Rng): () => [string, string] {
  const seen = new Set<string>();
  return () => {
    for (;;) {
      const first = rng.pick(FIRST_NAMES);
      const last = rng.pick(LAST_NAMES);
      const key = `${first} ${last}`;
      if (seen.has(key)) continue;
      seen.add(key);
      return [first, last];
    }
  };
}

/** `count` people with unique full names. */
export function uniqueNames(rng: Rng, count: number): [string, string][] {
  const next = nameSupply(rng);
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
