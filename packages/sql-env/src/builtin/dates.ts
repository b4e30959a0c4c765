import type { Mulberry32 } from '@sqlenv/shared';

const MS_PER_DAY = 86_400_000;

function dayNumber(isoDate: string): number {
  const [year, month, day] = isoDate.split('-').map(Number);
  if (year === undefined || month === undefined || day === undefined) {
    throw new RangeError(`not an ISO date: ${isoDate}`);
  }
  return Date.UTC(year, month - 1, day) / MS_PER_DAY;
}

function isoFromDayNumber(days: number): string {
  return new Date(days * MS_PER_DAY).toISOString().slice(0, 10);
}

/** A uniformly drawn ISO date (YYYY-MM-DD) in [from, to]. */
export function randomDate(rng: Mulberry32, from: string, to: string): string {
  return isoFromDayNumber(rng.int(dayNumber(from), dayNumber(to)));
}

export function addDays(isoDate: string, days: number): string {
  return isoFromDayNumber(dayNumber(isoDate) + days);
}

/** A clock time `HH:MM` on a quarter hour between the two hours (inclusive start, exclusive end). */
export function randomTime(rng: Mulberry32, fromHour: number, toHour: number): string {
  const quarters = rng.int(fromHour * 4, toHour * 4 - 1);
  const hours = String(Math.floor(quarters / 4)).padStart(2, '0');
  const minutes = String((quarters % 4) * 15).padStart(2, '0');
  return `${hours}:${minutes}`;
}

export const MONTH_NAMES = [
  'January', 'February', 'March', 'April', 'May', 'June',
  'July', 'August', 'September', 'October', 'November', 'December',
] as const;
