import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { SqlEnvRuntime } from '@sqlenv/sql-env';
import { type Harness, type OracleEpisode, startTestServer, type TestServer } from '@sqlenv/env-server/testing';

// The /web page in real headless Chromium: a person's oracle episode, click by click.

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
const ARTIFACTS = join(import.meta.dirname, '..', 'test-artifacts');

if (!haveChromium) {
  process.stderr.write(`web-e2e: skipped, ${CHROMIUM} is missing (apt-get install -y chromium)\n`);
}

describe.skipIf(!haveChromium)('/web in headless Chromium', () => {
  let runtime: SqlEnvRuntime;
  let harness: Harness;
  let browser: Browser;
  let oracle: OracleEpisode;
  let server: TestServer | undefined;

  beforeAll(async () => {
    ({ runtime, harness, oracle } = server = await startTestServer({ apiKey: 'browser-key' }));
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  async function step(page: Page, actionType: string, argument: string, expectedSteps: number): Promise<void> {
    await page.getByTestId(`action-${actionType}`).click();
    await page.getByTestId('argument').fill(argument);
    await page.getByTestId('step-button').click();
    await expect.poll(() => page.getByTestId('history').locator('tr').count()).toBe(expectedSteps);
  }

  it('plays an oracle episode: reset to a question, DESCRIBE, QUERY, ANSWER, DONE with reward ≈ 1.x', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const failedRequests: string[] = [];
    page.on('requestfailed', (r) => failedRequests.push(r.url()));
    await page.goto(`${harness.baseUrl}/web?api_key=browser-key`);
    await expect.poll(() => page.getByTestId('connection').textContent()).toBe('connected');

    // Dropdowns come from /web/catalog; pick the database, then the question.
    await expect.poll(() => page.getByTestId('db-select').locator('option').count()).toBeGreaterThan(1);
    await page.getByTestId('db-select').selectOption(oracle.dbId);
    await page.getByTestId('question-select').selectOption(oracle.questionId);
    await page.getByTestId('reset-button').click();
    await expect.poll(() => page.getByTestId('step-count').textContent()).toBe('0');
    const question = runtime.dataset.question(oracle.questionId);
    expect(await page.getByTestId('question').textContent()).toBe(question?.question_text);
    expect(await page.getByTestId('schema').locator('li').count()).toBeGreaterThan(0);
    expect(await page.getByTestId('schema').locator('li[data-described="true"]').count()).toBe(0);

    let steps = 0;
    for (const table of oracle.tables) {
      await step(page, 'DESCRIBE', table, ++steps);
    }
    // The schema panel fills in as tables are described; the DESCRIBE result is an HTML table.
    expect(await page.getByTestId('schema').locator('li[data-described="true"]').count()).toBe(oracle.tables.length);
    expect(await page.getByTestId('result').locator('table th').first().textContent()).toBe('column');

    await step(page, 'QUERY', oracle.goldSql, ++steps);
    expect(await page.getByTestId('result').locator('table tbody tr').count()).toBeGreaterThan(0);
    expect(await page.getByTestId('obs-error').isHidden()).toBe(true);

    await step(page, 'ANSWER', oracle.goldAnswer, ++steps);
    await expect.poll(() => page.getByTestId('done-badge').isVisible()).toBe(true);
    const total = Number(await page.getByTestId('total-reward').textContent());
    expect(total).toBeGreaterThan(1);
    expect(total).toBeLessThan(1.6);
    expect(await page.getByTestId('step-button').isDisabled()).toBe(true);
    const lastRow = page.getByTestId('history').locator('tr').last();
    expect(Number(await lastRow.locator('td').nth(4).textContent())).toBeGreaterThan(0.9);

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'web-episode.png'), fullPage: true });
    expect(failedRequests).toEqual([]);
    await page.close();
  });

  it('gives each tab its own session', async () => {
    const context = await browser.newContext();
    const [a, b] = [await context.newPage(), await context.newPage()];
    for (const page of [a, b]) {
      await page.goto(`${harness.baseUrl}/web?api_key=browser-key`);
      await expect.poll(() => page.getByTestId('connection').textContent()).toBe('connected');
      await page.getByTestId('question-select').selectOption(oracle.questionId);
      await page.getByTestId('reset-button').click();
      await expect.poll(() => page.getByTestId('step-count').textContent()).toBe('0');
    }
    await step(a, 'DESCRIBE', oracle.tables[0] ?? '', 1);
    await b.getByTestId('state-button').click();
    expect(await b.getByTestId('step-count').textContent()).toBe('0');
    expect(await a.getByTestId('step-count').textContent()).toBe('1');
    expect(harness.server.sessionCount()).toBeGreaterThanOrEqual(2);
    await context.close();
  });
});
