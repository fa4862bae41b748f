// Drives the real Airflow UI in Debian's chromium (playwright-core), as a person would: log in with the
// README's instructions, trigger Seam's DAGs from their trigger forms with Params typed into the fields,
// wait for each run's end on its page, open task logs, and save screenshots. It asserts nothing itself:
// it prints one `RESULT {json}` line per step (run states, what the pages showed) for the pytest to check.
//
// usage: node airflow_ui.mjs SCREENSHOT_DIR   (SEAM_AIRFLOW_URL, SEAM_AIRFLOW_USER, SEAM_AIRFLOW_PASSWORD)
import { chromium } from 'playwright-core';

const [shots] = process.argv.slice(2);
const base = process.env.SEAM_AIRFLOW_URL.replace(/\/$/, '');
const RUN_TIMEOUT_MS = 900_000;
let shot = 0;

function report(step, data) {
  console.log('RESULT ' + JSON.stringify({ step, ...data }));
}

async function snap(page, name) {
  shot += 1;
  const path = `${shots}/${String(shot).padStart(2, '0')}-${name}.png`;
  await page.screenshot({ path, fullPage: false });
  return path;
}

async function login(page) {
  await page.goto(base + '/');
  await page.waitForURL(/\/auth\/login/);
  await snap(page, 'login');
  await page.fill('input[name=username]', process.env.SEAM_AIRFLOW_USER);
  await page.fill('input[name=password]', process.env.SEAM_AIRFLOW_PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((u) => !u.toString().includes('/auth/login'));
  await page.getByText('Dags', { exact: true }).first().waitFor();
  await snap(page, 'home');
}

// Open the DAG's trigger form, type the Params into its fields, trigger; returns the new run's id. A trigger
// in the minute a scheduled run fires gets that run's logical date and is refused (409, the form stays open):
// as a person would, trigger again once the minute has passed.
async function trigger(page, dagId, { tables, pipeline, action, day } = {}) {
  for (let attempt = 1; ; attempt++) {
    await page.goto(`${base}/dags/${dagId}`);
    await page.getByRole('button', { name: 'Trigger Dag' }).click();
    const form = page.getByRole('dialog');
    await form.getByText('Run Parameters').waitFor();
    if (action) {
      await form.getByRole('combobox').first().click();
      await page.getByRole('option', { name: action, exact: true }).click();
    }
    if (tables) await form.locator('#element_tables').fill(tables.join('\n'));
    if (pipeline) await form.locator('#element_pipeline').fill(pipeline);
    if (day) await form.locator('#element_day').fill(day);
    await snap(page, `${dagId}-form`);
    const posted = page.waitForResponse(
      (r) => r.request().method() === 'POST' && new URL(r.url()).pathname === `/api/v2/dags/${dagId}/dagRuns`,
      { timeout: 60_000 },
    );
    await form.getByRole('button', { name: 'Trigger' }).last().click();
    if ((await posted).status() !== 409 || attempt >= 3) break;
    await page.waitForTimeout(61_000 - (Date.now() % 60_000));
  }
  await page.waitForURL(new RegExp(`/dags/${dagId}/runs/[^/]+$`), { timeout: 60_000 });
  return decodeURIComponent(page.url().split('/runs/')[1]);
}

// Airflow's REST API, with a token for the README's user: to wait for a run's end without a page open
let token;
async function api(path) {
  if (!token) {
    const auth = await fetch(base + '/auth/token', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ username: process.env.SEAM_AIRFLOW_USER, password: process.env.SEAM_AIRFLOW_PASSWORD }),
    });
    token = (await auth.json()).access_token;
  }
  const resp = await fetch(base + path, { headers: { Authorization: `Bearer ${token}` } });
  return resp.json();
}

// Wait for the run's end, then read the state its own page shows. A page left open while a run takes
// minutes re-renders all the while: a blank page and the API wait instead, so that chromium takes no CPU
// from the run it waits for.
async function waitRun(page, dagId, runId) {
  await page.goto('about:blank');
  const deadline = Date.now() + RUN_TIMEOUT_MS;
  const path = `/api/v2/dags/${dagId}/dagRuns/${encodeURIComponent(runId)}`;
  while (Date.now() < deadline && !['success', 'failed'].includes((await api(path)).state)) {
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
  await page.goto(`${base}/dags/${dagId}/runs/${encodeURIComponent(runId)}`);
  const header = page.locator('h2', { hasText: runId }).first();
  const ended = header.locator('xpath=..').getByText(/^(Success|Failed)$/);
  for (let tries = 1; tries <= 6; tries++) {  // the page may still show the state it fetched a moment earlier
    await header.waitFor({ timeout: 60_000 });
    try {
      await ended.first().waitFor({ timeout: 10_000 });
      break;
    } catch {
      await page.reload();
    }
  }
  const state = (await ended.count()) ? (await ended.first().innerText()).toLowerCase() : 'timeout';
  return { state, screenshot: await snap(page, `${dagId}-run-${state}`) };
}

// Open a task of the run from the run's task list (a mapped one by its table), and read its log.
async function taskLog(page, dagId, runId, taskId, mapLabel, expect) {
  await page.goto(`${base}/dags/${dagId}/runs/${encodeURIComponent(runId)}`);
  const row = mapLabel
    ? page.getByRole('row').filter({ hasText: mapLabel }).filter({ has: page.getByRole('link', { name: taskId, exact: true }) })
    : page.getByRole('row').filter({ has: page.getByRole('link', { name: taskId, exact: true }) });
  await row.first().getByRole('link', { name: taskId, exact: true }).click();
  await page.getByText(expect).first().waitFor({ timeout: 60_000 });
  const text = await page.locator('body').innerText();
  return { log: text, screenshot: await snap(page, `${dagId}-${taskId}-log`) };
}

const browser = await chromium.launch({
  executablePath: process.env.SEAM_CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await login(page);
  report('login', { url: page.url() });

  // a full load of two tables typed into the form, then the validate task's log of one of them
  let run = await trigger(page, 'seam_full_load', { tables: ['demo.accounts', 'demo.payments'] });
  let done = await waitRun(page, 'seam_full_load', run);
  const validated = done.state === 'success'
    ? await taskLog(page, 'seam_full_load', run, 'validate', 'demo.payments', 'EQUAL') : {};
  report('full_load', { run, ...done, log: validated.log, log_screenshot: validated.screenshot });

  // Params typed wrong: the first task fails with its one line
  for (const [name, params] of [['table_typo', { tables: ['demo.paymnets'] }],
    ['pipeline_typo', { pipeline: 'include/pipelines/demo.yml' }]]) {
    run = await trigger(page, 'seam_full_load', params);
    done = await waitRun(page, 'seam_full_load', run);
    const failed = await taskLog(page, 'seam_full_load', run, 'tables', null, 'bad input');
    report(name, { run, ...done, log: failed.log });
  }

  // the stream supervisor: start one table's stream, then stop it, from the form's action list
  run = await trigger(page, 'seam_stream', { action: 'start', tables: ['demo.payments'] });
  done = await waitRun(page, 'seam_stream', run);
  const supervised = done.state === 'success' ? await taskLog(page, 'seam_stream', run, 'supervise', null, 'demo.payments') : {};
  report('stream_start', { run, ...done, log: supervised.log });
  run = await trigger(page, 'seam_stream', { action: 'stop' });
  report('stream_stop', { run, ...(await waitRun(page, 'seam_stream', run)) });

  // the settlement of the previous business day, then its Assets
  run = await trigger(page, 'seam_settlement', {});
  done = await waitRun(page, 'seam_settlement', run);
  report('settlement', { run, ...done });
  run = await trigger(page, 'seam_settlement', { day: '2026-02-30' });
  done = await waitRun(page, 'seam_settlement', run);
  const typo = await taskLog(page, 'seam_settlement', run, 'plan', null, 'bad input');
  report('settlement_typo', { run, ...done, log: typo.log });
  await page.goto(`${base}/assets`);
  // an asset this run emitted for the first time is listed once Airflow has registered it, moments later,
  // and the page does not refresh by itself: reload until it is there
  for (let tries = 1; ; tries++) {
    try {
      await page.getByText(/demo\.accounts/).first().waitFor({ timeout: 5_000 });
      break;
    } catch (error) {
      if (tries >= 24) throw error;
      await page.reload();
    }
  }
  report('assets', { text: await page.locator('body').innerText(), screenshot: await snap(page, 'assets') });
} finally {
  await browser.close();
}
