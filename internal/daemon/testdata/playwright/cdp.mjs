// cdp.mjs drives a Berth browser session through its CDP endpoint with
// Playwright, as a user of connectOverCDP would.
// Usage: node cdp.mjs ENDPOINT TOKEN PAGE_URL
import { chromium } from 'playwright-core';

const [endpoint, token, url] = process.argv.slice(2);
const browser = await chromium.connectOverCDP(endpoint, {
  headers: { Authorization: `Bearer ${token}` },
  timeout: 30000,
});
const context = browser.contexts()[0] ?? (await browser.newContext());
const page = context.pages()[0] ?? (await context.newPage());
await page.goto(url);
await page.fill('#name', 'Playwright');
await page.check('#sub');
await page.click('#go');
console.log(await page.textContent('#out'));
await browser.close();
