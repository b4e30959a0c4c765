import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { reportCommand, trainCommand } from '@sqlenv/cli';
import { readRunMetrics, readSavedEvals, SavedEvalSchema } from '@sqlenv/runs';

// A short real run (embedded `sqlenv train`, random policy, evaluations before and after), its
// report.html opened from disk in headless Chromium: plots, the before/after table and the
// transcripts are there, hostile model text stays text, and the page loads nothing.

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
const ARTIFACTS = join(import.meta.dirname, '..', 'test-artifacts');
const HOSTILE = '<script>window.__pwned = 1</script><img src="https://example.invalid/x.png" onerror="window.__pwned = 2">';

if (!haveChromium) process.stderr.write(`run-report: skipped, ${CHROMIUM} is missing (apt-get install -y chromium)\n`);

function sink(): Writable & { text: () => string } {
  let text = '';
  const stream = new Writable({ write: (chunk: Buffer, _encoding, done) => ((text += chunk.toString('utf8')), done()) });
  return Object.assign(stream, { text: () => text });
}

describe.skipIf(!haveChromium)('run report in headless Chromium', () => {
  let scratch: string;
  let runDir: string;
  let browser: Browser;

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'sqlenv-run-report-'));
    runDir = join(scratch, 'run');
    const stdout = sink();
    const stderr = sink();
    const code = await trainCommand(['--policy', 'random', '--episodes', '64', '--eval-episodes', '6', '--run-dir', runDir, '--json', '--log-level', 'silent'], { stdout, stderr, env: {} });
    expect(code, stderr.text()).toBe(0);
    const summary = JSON.parse(stdout.text().trim().split('\n').at(-1) ?? '{}') as { report: string; policy_version: number; paired: unknown; evals: Record<string, { pass_at_k: unknown }> };
    expect(summary.report).toBe(join(runDir, 'report.html'));
    // The paired test over the six questions both evaluations played (one seed each, so pass@1 only).
    expect(summary.paired).toMatchObject({ questions: 6, episodes: 6, improved: false });
    expect(summary.evals['before']?.pass_at_k).toMatchObject({ '4': null, '8': null });

    // Model output is untrusted: put markup into a transcript and a question, then rebuild the report.
    const afterPath = join(runDir, 'evals', 'after.json');
    const after = SavedEvalSchema.parse(JSON.parse(readFileSync(afterPath, 'utf8')));
    const first = after.episodes[0];
    const turn = first?.transcript[0];
    if (!first || !turn) throw new Error('the after evaluation has no transcript');
    first.question = `${first.question} ${HOSTILE}`;
    turn.text = `I will look. ${HOSTILE}`;
    turn.result = `</pre>${HOSTILE}`;
    writeFileSync(afterPath, JSON.stringify(after));
    const out = sink();
    expect(await reportCommand([runDir], { stdout: out, stderr: sink() })).toBe(0);
    expect(out.text()).toMatch(/report\.html \(4 versions, 2 evaluations\)/);

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('shows the curves, the learner panels, the before/after table and the transcripts, and loads nothing', async () => {
    const metrics = readRunMetrics(runDir);
    expect(metrics.map((m) => m.version)).toEqual([1, 2, 3, 4]);
    const evals = readSavedEvals(runDir);
    expect(evals.map((x) => [x.name, x.version])).toEqual([
      ['before', 0],
      ['after', 4],
    ]);

    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    const url = pathToFileURL(join(runDir, 'report.html')).href;
    await page.goto(url);

    // Reward: one curve and both evaluations marked; success: success and format-error curves.
    const reward = page.locator('figure[data-chart="reward"]');
    expect(await reward.locator('path.series').count()).toBe(1);
    expect(await reward.locator('g.eval-marker').count()).toBe(2);
    expect(await reward.locator('text.x-label').textContent()).toBe('policy version');
    expect(await reward.locator('text.y-label').textContent()).toBe('reward');
    const success = page.locator('figure[data-chart="success"]');
    expect(await success.locator('path.series').evaluateAll((paths) => paths.map((p) => p.getAttribute('data-series')))).toEqual(['success_rate', 'format_error_rate']);
    expect(await success.locator('g.eval-marker').count()).toBe(2);
    // Each curve has a point per version.
    expect(await reward.locator('circle.dot').count()).toBe(4);
    expect(await page.locator('figure[data-chart="staleness"] path.series').count()).toBe(2);
    expect(await page.locator('figure[data-chart="episodes_per_s"] path.series').count()).toBe(1);
    // The statistics-only updater has no learner numbers: said so, not drawn as zeros.
    for (const id of ['loss', 'kl', 'clip_fraction', 'grad_norm']) {
      expect(await page.locator(`figure[data-chart="${id}"] .not-recorded`).textContent(), id).toBe('not recorded');
    }

    // Before vs after: a row per evaluated episode, and side-by-side transcripts of the same questions.
    expect(await page.locator('table[data-table="before-after"] tbody tr').count()).toBe(6);
    // The paired test sits above the table: the random policy cannot be shown to have improved.
    expect(await page.locator('p[data-paired="not-improved"]').textContent()).toMatch(/Paired difference after − before: [+−]\d+\.\d points/);
    const pairs = page.locator('details.pair');
    expect(await pairs.count()).toBe(6);
    expect(await pairs.first().locator('.side').count()).toBe(2);
    // Each side's turns carry the version evaluated (before: v0, after: the final v4).
    expect(await pairs.first().locator('.side').nth(0).locator('.turn-head').first().textContent()).toMatch(/· v0 ·/);
    expect(await pairs.first().locator('.side').nth(1).locator('.turn-head').first().textContent()).toMatch(/· v4 ·/);
    expect(await page.locator('.turn').count()).toBeGreaterThan(12);
    expect(await page.locator('.turn p.action').first().textContent()).toMatch(/^(DESCRIBE|SAMPLE|QUERY|ANSWER) /);

    // Hostile markup is shown as text: no script ran, no element was made from it.
    await page.locator('details.pair').evaluateAll((all) => all.forEach((d) => d.setAttribute('open', '')));
    expect(await page.evaluate(() => (globalThis as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.locator('body img, body script').count()).toBe(0);
    expect(await page.locator('pre.model-text', { hasText: '<script>window.__pwned = 1</script>' }).count()).toBe(1);
    expect(await page.locator('pre.observation', { hasText: '</pre><script>' }).count()).toBe(1);

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'run-report.png'), fullPage: true });
    expect(requests).toEqual([url]);
    await page.close();
  });
});
