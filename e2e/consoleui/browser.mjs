// Drives the console page in Debian's chromium with playwright-core (no
// browser download). Run by consoleui_test.go, which sets the environment:
//   CONSOLEUI_URL       the URL kubectl nodevirt console-ui printed (token included)
//   CONSOLEUI_NS        namespace with the VM; CONSOLEUI_VM its name (with a VNC device)
//   CONSOLEUI_FORBIDDEN a namespace the user has no rights in
//   CONSOLEUI_OUT       directory for screenshots
//   CONSOLEUI_WEB       the page's npm directory (its node_modules holds playwright-core)
//   CHROMIUM            the browser binary
// It prints "CHECKPOINT <name>" lines and waits for a line on stdin before
// going on (the Go test checks the API meanwhile), and a final
// "RESULT <json>" line. Any error in the page's console fails it.
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { join } from 'node:path';

const env = (k) => {
  if (!process.env[k]) throw new Error(`${k} is not set`);
  return process.env[k];
};
const require = createRequire(join(env('CONSOLEUI_WEB'), 'package.json'));
const { chromium } = require('playwright-core');

const ns = env('CONSOLEUI_NS');
const vm = env('CONSOLEUI_VM');
const out = env('CONSOLEUI_OUT');
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

async function checkpoint(name) {
  console.log(`CHECKPOINT ${name}`);
  const { value, done } = await lines.next();
  if (done || value.trim() !== 'ok') throw new Error(`checkpoint ${name}: test said ${done ? 'nothing' : value}`);
}

const step = (name) => console.log(`STEP ${name} ${new Date().toISOString()}`);
const result = {};
const errors = [];
const browser = await chromium.launch({ executablePath: env('CHROMIUM'), args: ['--no-sandbox'], headless: true });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  page.setDefaultTimeout(60000);

  step('list');
  const t0 = Date.now();
  await page.goto(env('CONSOLEUI_URL'));
  const row = page.locator(`tr[data-vm="${vm}"]`);
  await row.waitFor();
  result.vmListedMs = Date.now() - t0;
  result.firstContentfulPaintMs = await page.evaluate(() =>
    Math.round(performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1));
  await row.locator('[data-testid=phase]').filter({ hasText: 'Running' }).waitFor();

  step('serial console');
  await row.click();
  await page.locator('#console-state', { hasText: 'connected' }).waitFor();
  await page.locator('#terminal').click();
  const want = 'CONSOLEUI-42';
  await typeUntil(page, 'echo CONSOLEUI-$((6*7))', want, 60000);
  await page.screenshot({ path: join(out, 'console.png') });

  step('vnc');
  await page.click('[data-tab=vnc]');
  await page.locator('#vnc-state', { hasText: 'connected' }).waitFor();
  result.vnc = await waitNonBlank(page, 60000);
  await page.screenshot({ path: join(out, 'vnc.png') });

  step('details');
  await page.click('[data-tab=details]');
  await page.locator('[data-testid=guest-os]').waitFor({ timeout: 60000 });
  result.guestOS = (await page.locator('[data-testid=guest-os]').innerText()).split('\n').slice(0, 2).join(' ');
  await page.screenshot({ path: join(out, 'details.png') });

  step('pause');
  await page.click('[data-tab=console]');
  await page.click('button[data-action=pause]');
  await row.locator('[data-testid=phase]').filter({ hasText: 'Paused' }).waitFor({ timeout: 30000 });
  await page.locator('#vm-status', { hasText: 'Paused' }).waitFor();
  await page.screenshot({ path: join(out, 'paused-1280x800.png') });
  await checkpoint('paused');

  step('narrow');
  await page.setViewportSize({ width: 400, height: 800 });
  await page.waitForTimeout(300);
  result.narrowOverflowPx = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  await page.screenshot({ path: join(out, 'narrow-400.png'), fullPage: true });
  if (result.narrowOverflowPx > 1) errors.push(`narrow window: the page is ${result.narrowOverflowPx}px wider than the window`);
  await page.setViewportSize({ width: 1280, height: 800 });

  step('unpause and restart');
  await page.click('button[data-action=unpause]');
  await row.locator('[data-testid=phase]').filter({ hasText: 'Running' }).waitFor({ timeout: 30000 });
  await page.click('button[data-action=restart]');
  // The console drops with the old VMI and comes back with the new one.
  const consoleState = (connected) => page.waitForFunction((c) =>
    (document.querySelector('#console-state')?.textContent === 'serial console: connected') === c, connected, { timeout: 180000 });
  await consoleState(false);
  await consoleState(true);
  await page.locator('#terminal').click();
  await typeUntil(page, 'echo CONSOLEUI-AGAIN-$((1+1))', 'CONSOLEUI-AGAIN-2', 180000);
  await page.screenshot({ path: join(out, 'after-restart.png') });
  await checkpoint('restarted');

  step('forbidden namespace');
  const forbidden = env('CONSOLEUI_FORBIDDEN');
  await page.fill('#namespace', forbidden);
  await page.press('#namespace', 'Enter');
  const err = page.locator('[data-testid=list-error]');
  await err.waitFor();
  result.forbiddenText = await err.innerText();
  if (!/You may not list virtual machines in namespace/.test(result.forbiddenText)) errors.push(`forbidden namespace shows ${result.forbiddenText}`);
  if (await page.locator('tr[data-vm]').count() !== 0) errors.push('forbidden namespace: VM rows shown');
  await page.screenshot({ path: join(out, 'forbidden.png') });
} catch (e) {
  errors.push(`script: ${e.stack || e}`);
} finally {
  await browser.close();
}
result.errors = errors;
console.log(`RESULT ${JSON.stringify(result)}`);
process.exit(errors.length ? 1 : 0);

// typeUntil types cmd + Enter into the terminal, again every 5 s, until
// the terminal shows want (the guest's output, not the echo of the
// command: the command holds an arithmetic expression).
async function typeUntil(page, cmd, want, timeout) {
  const deadline = Date.now() + timeout;
  for (;;) {
    await page.keyboard.type(cmd);
    await page.keyboard.press('Enter');
    const seen = await page.waitForFunction((w) => document.querySelector('#terminal .xterm-rows')?.textContent.includes(w), want,
      { timeout: 5000 }).then(() => true, () => false);
    if (seen) return;
    if (Date.now() > deadline) throw new Error(`terminal never showed ${want}`);
  }
}

// waitNonBlank polls the noVNC canvas until it holds more than one colour
// and returns its size and the share of pixels unlike the first one.
async function waitNonBlank(page, timeout) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const r = await page.evaluate(() => {
      const c = document.querySelector('#screen canvas');
      if (!c || !c.width || !c.height) return null;
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let other = 0;
      for (let i = 0; i < d.length; i += 4) {
        if (d[i] !== d[0] || d[i + 1] !== d[1] || d[i + 2] !== d[2]) other++;
      }
      return { width: c.width, height: c.height, nonBackgroundShare: other / (d.length / 4) };
    });
    if (r && r.nonBackgroundShare > 0.001) return r;
    if (Date.now() > deadline) throw new Error(`VNC canvas stayed blank: ${JSON.stringify(r)}`);
    await page.waitForTimeout(1000);
  }
}
