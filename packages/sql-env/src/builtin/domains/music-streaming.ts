import type { DomainSpec, RowData, TableSpec } from '../domain-spec.ts';
import { addDays, randomDate, randomTime } from '../dates.ts';
import type { Mulberry32 } from '@sqlenv/shared';
import { nameSupply, STANDARD_VOCABULARY, type Vocabulary } from '../vocabulary.ts';
import { musicStreamingTemplates } from './music-streaming-questions.ts';

/** A music streaming service: a catalogue plus listening history. */
const tables: readonly TableSpec[] = [
  {
    name: 'artists',
    columns: [
      { name: 'artist_id', type: 'INTEGER', primaryKey: true },
      { name: 'name', type: 'TEXT' },
      { name: 'country', type: 'TEXT' },
      { name: 'formed_year', type: 'INTEGER' },
    ],
  },
  {
    name: 'albums',
    columns: [
      { name: 'album_id', type: 'INTEGER', primaryKey: true },
      { name: 'artist_id', type: 'INTEGER', references: { table: 'artists', column: 'artist_id' } },
      { name: 'title', type: 'TEXT' },
      { name: 'genre', type: 'TEXT' },
      { name: 'release_date', type: 'TEXT', temporal: true },
      { name: 'record_label', type: 'TEXT', nullable: true },
    ],
  },
  {
    name: 'tracks',
    columns: [
      { name: 'track_id', type: 'INTEGER', primaryKey: true },
      { name: 'album_id', type: 'INTEGER', references: { table: 'albums', column: 'album_id' } },
      { name: 'title', type: 'TEXT' },
      { name: 'track_number', type: 'INTEGER' },
      { name: 'duration_seconds', type: 'INTEGER' },
      { name: 'explicit', type: 'INTEGER' },
    ],
  },
  {
    name: 'listeners',
    columns: [
      { name: 'listener_id', type: 'INTEGER', primaryKey: true },
      { name: 'username', type: 'TEXT' },
      { name: 'country', type: 'TEXT' },
      { name: 'signup_date', type: 'TEXT', temporal: true },
      { name: 'plan', type: 'TEXT' },
    ],
  },
  {
    name: 'plays',
    columns: [
      { name: 'play_id', type: 'INTEGER', primaryKey: true },
      { name: 'listener_id', type: 'INTEGER', references: { table: 'listeners', column: 'listener_id' } },
      { name: 'track_id', type: 'INTEGER', references: { table: 'tracks', column: 'track_id' } },
      { name: 'played_at', type: 'TEXT', temporal: true },
      { name: 'seconds_played', type: 'INTEGER' },
    ],
  },
];

const GENRES = [['Pop', 5], ['Rock', 4], ['Hip-Hop', 3], ['Electronic', 3], ['Jazz', 2], ['Folk', 2], ['Classical', 1]] as const;
/** Share of explicit tracks per genre. */
const EXPLICIT_RATE: Readonly<Record<string, number>> = { 'Hip-Hop': 0.6, Rock: 0.2, Pop: 0.15, Electronic: 0.1 };
const LABELS = ['Northlight Records', 'Blue Harbour Music', 'Static Wave', 'Copperline', 'Orchard Lane Records'] as const;
const PLANS = [['free', 5], ['premium', 4], ['family', 2], ['student', 2]] as const;

/** A title generator that never repeats, so titles identify rows the way names do. */
function titleSupply(rng: Mulberry32, { titleAdjectives: adjectives, titleNouns: nouns, titleSingular: singular }: Vocabulary): () => string {
  const seen = new Set<string>();
  const shapes = [
    () => `${rng.pick(adjectives)} ${rng.pick(singular)}`,
    () => `${rng.pick(singular)} of ${rng.pick(nouns)}`,
    () => `The ${rng.pick(singular)}`,
    () => rng.sample(singular, 2).join(' and '),
    () => `${rng.pick(adjectives)} ${rng.pick(nouns)}`,
  ];
  return () => {
    for (;;) {
      const title = rng.pick(shapes)();
      if (seen.has(title)) continue;
      seen.add(title);
      return title;
    }
  };
}

function bandSupply(rng: Mulberry32, { titleAdjectives: adjectives, titleNouns: nouns }: Vocabulary): () => string {
  const seen = new Set<string>();
  return () => {
    for (;;) {
      const name = `The ${rng.pick(adjectives)} ${rng.pick(nouns)}`;
      if (seen.has(name)) continue;
      seen.add(name);
      return name;
    }
  };
}

function generateRows(rng: Mulberry32, vocabulary: Vocabulary = STANDARD_VOCABULARY): Map<string, RowData[]> {
  const nextTitle = titleSupply(rng.fork('titles'), vocabulary);
  const nextBand = bandSupply(rng.fork('bands'), vocabulary);
  const nextPerson = nameSupply(rng.fork('names'), vocabulary);
  const countries = [...new Set(vocabulary.cities.map(([, country]) => country))];

  const artists: RowData[] = [];
  const artistGenre = new Map<number, string>();
  for (let i = 0; i < 24; i++) {
    // Solo artists and bands ("The Velvet Foxes"); a title supply keeps band names unique.
    const name = rng.chance(0.35) ? nextPerson().join(' ') : nextBand();
    artists.push({ artist_id: i + 1, name, country: rng.pick(countries), formed_year: rng.int(1968, 2019) });
    artistGenre.set(i + 1, rng.weighted(GENRES));
  }

  const albums: RowData[] = [];
  const tracks: RowData[] = [];
  for (const artist of artists) {
    const artistId = Number(artist.artist_id);
    const mainGenre = artistGenre.get(artistId) ?? 'Pop';
    const firstRelease = `${Math.max(Number(artist.formed_year) + 1, 1970)}-01-01`;
    for (let a = rng.weighted([[1, 3], [2, 4], [3, 3], [4, 2]]); a > 0; a--) {
      const albumId = albums.length + 1;
      const genre = rng.chance(0.85) ? mainGenre : rng.weighted(GENRES);
      albums.push({
        album_id: albumId,
        artist_id: artistId,
        title: nextTitle(),
        genre,
        release_date: randomDate(rng, firstRelease, '2024-10-31'),
        record_label: rng.chance(0.15) ? null : rng.pick(LABELS),
      });
      const trackCount = rng.int(6, 12);
      for (let n = 1; n <= trackCount; n++) {
        tracks.push({
          track_id: tracks.length + 1,
          album_id: albumId,
          title: nextTitle(),
          track_number: n,
          duration_seconds: genre === 'Classical' ? rng.int(240, 900) : rng.int(125, 395),
          explicit: rng.chance(EXPLICIT_RATE[genre] ?? 0) ? 1 : 0,
        });
      }
    }
  }

  const usernames = new Set<string>();
  const listeners = Array.from({ length: 120 }, (_, i): RowData => {
    let username: string;
    do {
      const [first, last] = nextPerson();
      username = `${first.normalize('NFD').replace(/[^A-Za-z]/g, '').toLowerCase()}_${last.normalize('NFD').replace(/[^A-Za-z]/g, '').slice(0, 3).toLowerCase()}${rng.int(1, 99)}`;
    } while (usernames.has(username));
    usernames.add(username);
    return {
      listener_id: i + 1,
      username,
      country: rng.pick(countries),
      signup_date: randomDate(rng, '2018-01-01', '2024-06-30'),
      plan: rng.weighted(PLANS),
    };
  });

  // Popularity is skewed: a few albums get most plays; some listeners never play.
  const albumWeights = albums.map((album) => [Number(album.album_id), rng.chance(0.2) ? 8 : rng.int(1, 3)] as const);
  const tracksByAlbum = new Map<number, RowData[]>();
  for (const track of tracks) {
    const list = tracksByAlbum.get(Number(track.album_id)) ?? [];
    list.push(track);
    tracksByAlbum.set(Number(track.album_id), list);
  }
  const active = listeners.filter(() => !rng.chance(0.08));
  const plays: RowData[] = [];
  for (let i = 0; i < 900; i++) {
    const listener = rng.pick(active);
    const track = rng.pick(tracksByAlbum.get(rng.weighted(albumWeights)) ?? tracks);
    const duration = Number(track.duration_seconds);
    const day = randomDate(rng, addDays(String(listener.signup_date), 1), '2024-12-31');
    plays.push({
      play_id: i + 1,
      listener_id: listener.listener_id ?? null,
      track_id: track.track_id ?? null,
      played_at: `${day} ${randomTime(rng, 0, 24)}:${String(rng.int(0, 59)).padStart(2, '0')}`,
      seconds_played: rng.chance(0.25) ? rng.int(5, 60) : duration,
    });
  }

  return new Map([
    ['artists', artists],
    ['albums', albums],
    ['tracks', tracks],
    ['listeners', listeners],
    ['plays', plays],
  ]);
}

export const musicStreaming: DomainSpec = {
  dbId: 'music_streaming',
  title: 'Music streaming',
  summary: 'A music streaming service: artists, albums, tracks, listeners on subscription plans and their play history.',
  tables,
  generateRows,
  templates: musicStreamingTemplates,
};
