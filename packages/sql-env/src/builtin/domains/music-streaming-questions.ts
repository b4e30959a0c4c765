import { MONTH_NAMES } from '../dates.ts';
import { defineTemplate, noTieAfter, sqlText as t, type QuestionTemplate } from '../question-template.ts';
import { inCountry } from '../vocabulary.ts';

const ARTIST = 'SELECT name FROM artists ORDER BY artist_id';
const PLAYED_ARTIST = 'SELECT DISTINCT ar.name FROM artists ar JOIN albums al ON al.artist_id = ar.artist_id JOIN tracks tr ON tr.album_id = al.album_id JOIN plays p ON p.track_id = tr.track_id ORDER BY ar.name';
const ALBUM = 'SELECT title FROM albums ORDER BY album_id';
const LISTENER = 'SELECT DISTINCT l.username FROM listeners l JOIN plays p ON p.listener_id = l.listener_id ORDER BY l.username';
const COUNTRY = 'SELECT DISTINCT country FROM listeners ORDER BY country';
const PLAN = 'SELECT DISTINCT plan FROM listeners ORDER BY plan';

/** artists → albums → tracks, the join most catalogue questions need. */
const CATALOGUE = 'artists ar JOIN albums al ON al.artist_id = ar.artist_id JOIN tracks tr ON tr.album_id = al.album_id';

export const musicStreamingTemplates: readonly QuestionTemplate[] = [
  defineTemplate({
    id: 'albums-by-artist', answer: 'integer', instances: 3,
    params: (p) => ({ artist: p.text(ARTIST) }),
    question: ({ artist }) => `How many albums has ${artist} released?`,
    sql: ({ artist }) => `SELECT COUNT(*) FROM albums al JOIN artists ar ON ar.artist_id = al.artist_id WHERE ar.name = ${t(artist)}`,
  }),
  defineTemplate({
    id: 'tracks-on-album', answer: 'integer', instances: 3,
    params: (p) => ({ album: p.text(ALBUM) }),
    question: ({ album }) => `How many tracks are on the album "${album}"?`,
    sql: ({ album }) => `SELECT COUNT(*) FROM tracks tr JOIN albums al ON al.album_id = tr.album_id WHERE al.title = ${t(album)}`,
  }),
  defineTemplate({
    id: 'album-artist', answer: 'string', instances: 3,
    params: (p) => ({ album: p.text(ALBUM) }),
    question: ({ album }) => `Which artist released the album "${album}"?`,
    sql: ({ album }) => `SELECT ar.name FROM albums al JOIN artists ar ON ar.artist_id = al.artist_id WHERE al.title = ${t(album)}`,
  }),
  defineTemplate({
    id: 'album-genre', answer: 'string', instances: 2,
    params: (p) => ({ album: p.text(ALBUM) }),
    question: ({ album }) => `What genre is the album "${album}"?`,
    sql: ({ album }) => `SELECT genre FROM albums WHERE title = ${t(album)}`,
  }),
  defineTemplate({
    id: 'artist-formed', answer: 'integer', instances: 2,
    params: (p) => ({ artist: p.text(ARTIST) }),
    question: ({ artist }) => `In which year did ${artist} start making music?`,
    sql: ({ artist }) => `SELECT formed_year FROM artists WHERE name = ${t(artist)}`,
  }),
  defineTemplate({
    id: 'average-track-length', answer: 'float', instances: 3,
    params: (p) => ({ album: p.text(ALBUM) }),
    question: ({ album }) => `What is the average track length in seconds on the album "${album}", rounded to one decimal?`,
    sql: ({ album }) => `SELECT ROUND(AVG(tr.duration_seconds), 1) FROM tracks tr JOIN albums al ON al.album_id = tr.album_id WHERE al.title = ${t(album)}`,
  }),
  defineTemplate({
    id: 'longest-track-of-artist', answer: 'integer', instances: 2,
    params: (p) => ({ artist: p.text(ARTIST) }),
    question: ({ artist }) => `How long, in seconds, is the longest track by ${artist}?`,
    sql: ({ artist }) => `SELECT MAX(tr.duration_seconds) FROM ${CATALOGUE} WHERE ar.name = ${t(artist)}`,
  }),
  defineTemplate({
    id: 'explicit-tracks-on-album', answer: 'list', instances: 3,
    params: (p) => ({ album: p.text('SELECT DISTINCT al.title FROM albums al JOIN tracks tr ON tr.album_id = al.album_id WHERE tr.explicit = 1 ORDER BY al.title') }),
    question: ({ album }) => `Which tracks on "${album}" are marked as explicit?`,
    sql: ({ album }) => `SELECT tr.title FROM tracks tr JOIN albums al ON al.album_id = tr.album_id WHERE al.title = ${t(album)} AND tr.explicit = 1 ORDER BY tr.track_number`,
  }),
  defineTemplate({
    id: 'artists-from-country', answer: 'list', instances: 3,
    params: (p) => ({ country: p.text('SELECT DISTINCT country FROM artists ORDER BY country') }),
    question: ({ country }) => `Which artists in the catalogue come from ${inCountry(country)}?`,
    sql: ({ country }) => `SELECT name FROM artists WHERE country = ${t(country)} ORDER BY name`,
  }),
  defineTemplate({
    id: 'listeners-on-plan-in-country', answer: 'integer', instances: 3,
    params: (p) => ({ plan: p.text(PLAN), country: p.text(COUNTRY) }),
    question: ({ plan, country }) => `How many listeners from ${inCountry(country)} are on the ${plan} plan?`,
    sql: ({ plan, country }) => `SELECT COUNT(*) FROM listeners WHERE plan = ${t(plan)} AND country = ${t(country)}`,
  }),
  defineTemplate({
    id: 'albums-per-genre', answer: 'table', instances: 1,
    params: () => ({}),
    question: () => 'How many albums are there in each genre? Give the genre and the number of albums.',
    sql: () => 'SELECT genre, COUNT(*) FROM albums GROUP BY genre ORDER BY genre',
  }),
  defineTemplate({
    id: 'plan-overview', answer: 'table', instances: 1,
    params: () => ({}),
    question: () => 'For each subscription plan, give the number of listeners on it and the total number of plays they made.',
    sql: () => 'SELECT l.plan, COUNT(DISTINCT l.listener_id), COUNT(p.play_id) FROM listeners l LEFT JOIN plays p ON p.listener_id = l.listener_id GROUP BY l.plan ORDER BY l.plan',
  }),
  defineTemplate({
    id: 'long-tracks-by-artist', answer: 'list', instances: 3,
    params: (p) => ({ artist: p.text(ARTIST), minutes: p.pick([4, 5, 6]) }),
    question: ({ artist, minutes }) => `Which tracks by ${artist} are longer than ${minutes} minutes?`,
    sql: ({ artist, minutes }) => `SELECT tr.title FROM ${CATALOGUE} WHERE ar.name = ${t(artist)} AND tr.duration_seconds > ${minutes * 60} ORDER BY tr.title`,
  }),
  defineTemplate({
    id: 'plays-of-artist', answer: 'integer', instances: 3,
    params: (p) => ({ artist: p.text(PLAYED_ARTIST) }),
    question: ({ artist }) => `How many times have tracks by ${artist} been played?`,
    sql: ({ artist }) => `SELECT COUNT(*) FROM plays p JOIN tracks tr ON tr.track_id = p.track_id JOIN albums al ON al.album_id = tr.album_id JOIN artists ar ON ar.artist_id = al.artist_id WHERE ar.name = ${t(artist)}`,
  }),
  defineTemplate({
    id: 'most-played-track-of-artist', answer: 'string', instances: 3,
    params: (p) => ({ artist: p.text(PLAYED_ARTIST) }),
    question: ({ artist }) => `What is the most played track by ${artist}?`,
    sql: ({ artist }) => `SELECT tr.title FROM ${CATALOGUE} JOIN plays p ON p.track_id = tr.track_id WHERE ar.name = ${t(artist)} GROUP BY tr.track_id ORDER BY COUNT(*) DESC LIMIT 1`,
    check: ({ artist }) => noTieAfter(`SELECT COUNT(*) FROM ${CATALOGUE} JOIN plays p ON p.track_id = tr.track_id WHERE ar.name = ${t(artist)} GROUP BY tr.track_id ORDER BY COUNT(*) DESC`, 1),
  }),
  defineTemplate({
    id: 'prolific-artists', answer: 'list', instances: 2,
    params: (p) => ({ n: p.int(2, 3) }),
    question: ({ n }) => `Which artists have released more than ${n} albums?`,
    sql: ({ n }) => `SELECT ar.name FROM artists ar JOIN albums al ON al.artist_id = ar.artist_id GROUP BY ar.artist_id HAVING COUNT(*) > ${n} ORDER BY ar.name`,
  }),
  defineTemplate({
    id: 'silent-listeners', answer: 'list', instances: 1,
    params: () => ({}),
    question: () => 'Which listeners have never played a track? Give their usernames.',
    sql: () => 'SELECT username FROM listeners WHERE listener_id NOT IN (SELECT listener_id FROM plays) ORDER BY username',
  }),
  defineTemplate({
    id: 'unplayed-tracks-on-album', answer: 'list', instances: 3,
    params: (p) => ({ album: p.text(ALBUM) }),
    question: ({ album }) => `Which tracks on "${album}" have never been played?`,
    sql: ({ album }) => `SELECT tr.title FROM tracks tr JOIN albums al ON al.album_id = tr.album_id WHERE al.title = ${t(album)} AND tr.track_id NOT IN (SELECT track_id FROM plays) ORDER BY tr.track_number`,
  }),
  defineTemplate({
    id: 'longer-than-average', answer: 'list', instances: 3,
    params: (p) => ({ album: p.text(ALBUM) }),
    question: ({ album }) => `Which tracks on "${album}" are longer than the average length of all tracks in the catalogue?`,
    sql: ({ album }) => `SELECT tr.title FROM tracks tr JOIN albums al ON al.album_id = tr.album_id WHERE al.title = ${t(album)} AND tr.duration_seconds > (SELECT AVG(duration_seconds) FROM tracks) ORDER BY tr.track_number`,
  }),
  defineTemplate({
    id: 'genres-never-heard', answer: 'list', instances: 3,
    params: (p) => ({ user: p.text(LISTENER) }),
    question: ({ user }) => `Which genres has the listener ${user} never played?`,
    sql: ({ user }) => `SELECT genre FROM albums EXCEPT SELECT al.genre FROM albums al JOIN tracks tr ON tr.album_id = al.album_id JOIN plays p ON p.track_id = tr.track_id JOIN listeners l ON l.listener_id = p.listener_id WHERE l.username = ${t(user)}`,
  }),
  defineTemplate({
    id: 'listeners-of-two-artists', answer: 'list', instances: 3,
    params: (p) => ({ artists: p.twoTexts(PLAYED_ARTIST), plan: p.text(PLAN) }),
    question: ({ artists: [a, b], plan }) => `Which listeners on the ${plan} plan have played tracks by both ${a} and ${b}? Give their usernames.`,
    sql: ({ artists, plan }) => {
      const fans = (artist: string): string =>
        `SELECT l.username FROM listeners l JOIN plays p ON p.listener_id = l.listener_id JOIN tracks tr ON tr.track_id = p.track_id JOIN albums al ON al.album_id = tr.album_id JOIN artists ar ON ar.artist_id = al.artist_id WHERE l.plan = ${t(plan)} AND ar.name = ${t(artist)}`;
      return `${fans(artists[0])} INTERSECT ${fans(artists[1])}`;
    },
  }),
  defineTemplate({
    id: 'listening-hours', answer: 'float', instances: 3,
    params: (p) => ({ user: p.text(LISTENER) }),
    question: ({ user }) => `How many hours of music has ${user} listened to in total, rounded to two decimals?`,
    sql: ({ user }) => `SELECT ROUND(SUM(p.seconds_played) / 3600.0, 2) FROM plays p JOIN listeners l ON l.listener_id = p.listener_id WHERE l.username = ${t(user)}`,
  }),
  defineTemplate({
    id: 'longest-tracks-on-album', answer: 'table', instances: 3,
    params: (p) => ({ album: p.text(ALBUM), k: p.int(2, 3) }),
    question: ({ album, k }) => `Give the title and duration in seconds of the ${k} longest tracks on "${album}".`,
    sql: ({ album, k }) => `SELECT tr.title, tr.duration_seconds FROM tracks tr JOIN albums al ON al.album_id = tr.album_id WHERE al.title = ${t(album)} ORDER BY tr.duration_seconds DESC LIMIT ${k}`,
    check: ({ album, k }) => noTieAfter(`SELECT tr.duration_seconds FROM tracks tr JOIN albums al ON al.album_id = tr.album_id WHERE al.title = ${t(album)} ORDER BY tr.duration_seconds DESC`, k),
  }),
  defineTemplate({
    id: 'plays-in-month', answer: 'integer', instances: 2,
    params: (p) => ({ month: p.int(1, 12), year: p.pick([2023, 2024]) }),
    question: ({ month, year }) => `How many plays were recorded in ${MONTH_NAMES[month - 1] ?? ''} ${year}?`,
    sql: ({ month, year }) => `SELECT COUNT(*) FROM plays WHERE strftime('%Y-%m', played_at) = '${year}-${String(month).padStart(2, '0')}'`,
  }),
  defineTemplate({
    id: 'countries-of-fans', answer: 'list', instances: 3,
    params: (p) => ({ artist: p.text(PLAYED_ARTIST) }),
    question: ({ artist }) => `From which countries are the listeners who have played ${artist}?`,
    sql: ({ artist }) => `SELECT DISTINCT l.country FROM listeners l JOIN plays p ON p.listener_id = l.listener_id JOIN tracks tr ON tr.track_id = p.track_id JOIN albums al ON al.album_id = tr.album_id JOIN artists ar ON ar.artist_id = al.artist_id WHERE ar.name = ${t(artist)} ORDER BY l.country`,
  }),
  defineTemplate({
    id: 'average-seconds-by-plan', answer: 'float', instances: 2,
    params: (p) => ({ plan: p.text(PLAN) }),
    question: ({ plan }) => `On average, how many seconds does a single play last for listeners on the ${plan} plan? Round to one decimal.`,
    sql: ({ plan }) => `SELECT ROUND(AVG(p.seconds_played), 1) FROM plays p JOIN listeners l ON l.listener_id = p.listener_id WHERE l.plan = ${t(plan)}`,
  }),
  defineTemplate({
    id: 'albums-released-in-year', answer: 'table', instances: 3,
    params: (p) => ({ year: p.text("SELECT DISTINCT strftime('%Y', release_date) FROM albums ORDER BY 1") }),
    question: ({ year }) => `Which albums were released in ${year}? Give each album title with its artist's name.`,
    sql: ({ year }) => `SELECT al.title, ar.name FROM albums al JOIN artists ar ON ar.artist_id = al.artist_id WHERE strftime('%Y', al.release_date) = '${year}' ORDER BY al.title`,
  }),
  defineTemplate({
    id: 'skipped-plays-on-album', answer: 'integer', instances: 2,
    params: (p) => ({ album: p.text('SELECT DISTINCT al.title FROM albums al JOIN tracks tr ON tr.album_id = al.album_id JOIN plays p ON p.track_id = tr.track_id ORDER BY al.title') }),
    question: ({ album }) => `How many plays of tracks from "${album}" were stopped within the first minute?`,
    sql: ({ album }) => `SELECT COUNT(*) FROM plays p JOIN tracks tr ON tr.track_id = p.track_id JOIN albums al ON al.album_id = tr.album_id WHERE al.title = ${t(album)} AND p.seconds_played < 60`,
  }),
  defineTemplate({
    id: 'unlabelled-albums', answer: 'list', instances: 1,
    params: () => ({}),
    question: () => 'Which albums were released without a record label?',
    sql: () => 'SELECT title FROM albums WHERE record_label IS NULL ORDER BY title',
  }),
];
