#!/usr/bin/env node
// Opens a trace of elite-rt's schedule (Trace Event JSON, `ELITE_TRACE=<path>`) in the trace
// viewer of chrome://tracing, headless, and checks what the viewer made of it: no import error
// or warning, a track per processor with the ULTs' runs on it, the flow arrows of wake-ups and
// spawns bound to runs at both ends. Then it zooms to a window of the schedule, turns the flow
// arrows on, selects a woken run (its arguments and flows show in the panel below) and takes a
// screenshot.
//
//   node scripts/trace-view.mjs TRACE.json OUT.png [--page URL] [--chromium PATH]
//        [--start US] [--span US] [--width PX] [--height PX]
//
// Usually run through scripts/trace-view.sh, which finds playwright-core and the viewer page.
// `--page`: the viewer, `chrome://tracing` (default; Chromium builds that have it) or a file:// URL
// of the same page generated from catapult (`tracing/bin/generate_about_tracing_contents`).
// `--start` (microseconds from the first run) and `--span` (default 2000) choose the window, as
// scripts/trace-svg.py does: by default the one in which the least busy processor is busiest.
// Prints what the viewer shows, one line each; exits 1 on an import error or warning, a missing
// processor track, no runs or no flow arrows.

import { readFileSync, mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createRequire } from 'node:module';

const usage = 'usage: trace-view.mjs TRACE.json OUT.png [--page URL] [--chromium PATH] ' +
  '[--start US] [--span US] [--width PX] [--height PX]';
const opts = { page: 'chrome://tracing', chromium: process.env.CHROMIUM || '', span: 2000,
  width: 1400, height: 820 };
const pos = [];
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a.startsWith('--')) {
    const k = a.slice(2);
    const v = process.argv[++i];
    if (!(k in opts) && k !== 'start' || v === undefined) {
      console.error(`${usage}\nunknown option or missing value: ${a}`);
      process.exit(2);
    }
    opts[k] = ['span', 'width', 'height', 'start'].includes(k) ? Number(v) : v;
    if (typeof opts[k] === 'number' && !Number.isFinite(opts[k])) {
      console.error(`${a} takes a number, not ${JSON.stringify(v)}`);
      process.exit(2);
    }
  } else {
    pos.push(a);
  }
}
if (pos.length !== 2) {
  console.error(usage);
  process.exit(2);
}
const [tracePath, outPath] = pos.map((p) => resolve(p));

// playwright-core from NODE_PATH (trace-view.sh installs it outside the repository).
const require = createRequire(join(process.cwd(), 'noop.js'));
let chromium;
try {
  ({ chromium } = require('playwright-core'));
} catch {
  console.error('playwright-core not found: run through scripts/trace-view.sh, or set NODE_PATH ' +
    'to a node_modules that has it (npm install playwright-core)');
  process.exit(2);
}

// The window, from the JSON itself: microseconds of the trace's clock.
const trace = JSON.parse(readFileSync(tracePath, 'utf8'));
const events = trace.traceEvents || trace;
const runs = events.filter((e) => e.ph === 'X' && e.cat === 'run');
const procTids = events
  .filter((e) => e.ph === 'M' && e.name === 'thread_name' && /^processor /.test(e.args.name))
  .map((e) => e.tid);
if (!runs.length || !procTids.length) {
  console.error(`${tracePath}: no runs or no processor tracks; is it a trace of elite-rt?`);
  process.exit(1);
}
// chrome://tracing sits among the internal debugging pages, which newer Chromium builds keep off
// unless the profile's local state turns them on.
const profile = mkdtempSync(join(tmpdir(), 'trace-view-'));
writeFileSync(join(profile, 'Local State'), JSON.stringify({ internal_only_uis_enabled: true }));
const launch = { headless: true, viewport: { width: opts.width, height: opts.height },
  args: ['--no-sandbox', '--disable-gpu'] };
if (opts.chromium) launch.executablePath = opts.chromium;
const ctx = await chromium.launchPersistentContext(profile, launch);
let failed = false;
const fail = (msg) => { console.log(`FAIL: ${msg}`); failed = true; };
try {
  const page = await ctx.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  try {
    await page.goto(opts.page, { timeout: 30000 });
  } catch (e) {
    throw new Error(`cannot open ${opts.page} (${e.message.split('\n')[0]}); Debian's Chromium ` +
      'is built without it: set CATAPULT=<a checkout of catapult> and scripts/trace-view.sh ' +
      'generates the same page from its source');
  }
  if (/debug-webuis-disabled|chrome-error/.test(page.url())) {
    throw new Error(`${opts.page} is not available in this Chromium (landed on ${page.url()})`);
  }

  // Load, as a user does: the Load button opens a file chooser.
  const chooser = page.waitForEvent('filechooser', { timeout: 30000 });
  await page.getByRole('button', { name: 'Load', exact: true }).click();
  await (await chooser).setFiles(tracePath);
  await page.waitForFunction(() => {
    const tv = document.querySelector('tr-ui-timeline-view');
    return (tv && tv.model && tv.trackView) ||
      Array.from(document.querySelectorAll('tr-ui-b-overlay')).some((o) => o.visible);
  }, null, { timeout: 120000 });
  await page.waitForTimeout(500);

  const seen = await page.evaluate(() => {
    const overlays = Array.from(document.querySelectorAll('tr-ui-b-overlay'))
      .filter((o) => o.visible).map((o) => o.textContent.trim().replace(/\s+/g, ' '));
    const tv = document.querySelector('tr-ui-timeline-view');
    const m = tv && tv.model;
    if (!m) return { overlays };
    const bar = Polymer.dom(tv.root).querySelector('#import-warnings');
    const threads = [];
    for (const p of Object.values(m.processes)) {
      for (const t of Object.values(p.threads)) {
        const slices = t.sliceGroup.slices;
        threads.push({
          process: p.userFriendlyName, name: t.name, tid: t.tid,
          slices: slices.length,
          runs: slices.filter((s) => s.category === 'run').length,
          idle: slices.filter((s) => s.category === 'idle').length,
          instants: t.sliceGroup.slices.filter((s) => s.duration === 0).length,
        });
      }
    }
    const flows = m.flowEvents;
    const bound = flows.filter((f) => f.startSlice && f.endSlice).length;
    const byCat = {};
    for (const f of flows) byCat[f.category] = (byCat[f.category] || 0) + 1;
    return {
      overlays,
      warnings: m.importWarnings.map((w) => `${w.type}: ${w.message}`),
      warningBar: bar ? bar.textContent.trim().replace(/\s+/g, ' ') : '',
      threads,
      instants: m.instantEvents.length +
        Object.values(m.processes).reduce((n, p) => n + p.instantEvents.length, 0),
      flows: flows.length, bound, byCat,
      bounds: [m.bounds.min, m.bounds.max],
      metadata: m.metadata.map((x) => x.name),
    };
  });

  console.log(`viewer: ${opts.page}`);
  for (const o of seen.overlays) fail(`the viewer shows: ${o}`);
  if (!seen.threads) throw new Error('no model was loaded');
  console.log(`import warnings: ${seen.warnings.length}`);
  for (const w of seen.warnings) fail(`import warning: ${w}`);
  if (seen.warningBar) fail(`warning bar: ${seen.warningBar}`);
  for (const t of seen.threads) {
    console.log(`track ${t.process} / ${t.name} (tid ${t.tid}): ${t.slices} slices, ` +
      `${t.runs} runs, ${t.idle} idle/parked`);
  }
  const procs = seen.threads.filter((t) => /^processor /.test(t.name));
  if (procs.length !== procTids.length) {
    fail(`${procTids.length} processor tracks in the file, ${procs.length} in the viewer`);
  }
  if (!procs.some((t) => t.runs > 0)) fail('no runs on the processors\' tracks');
  console.log(`process-wide instants: ${seen.instants}`);
  console.log(`flows: ${seen.flows} (${Object.entries(seen.byCat).map(([k, v]) => `${k} ${v}`)
    .join(', ')}), bound to slices at both ends: ${seen.bound}`);
  if (!seen.flows) fail('no flow arrows');
  if (seen.bound !== seen.flows) fail(`${seen.flows - seen.bound} flows not bound to a slice`);
  console.log(`metadata: ${seen.metadata.join(', ')}`);
  for (const e of pageErrors) fail(`page error: ${e}`);

  // The picture: the window, every flow category's arrows on, a woken run selected.
  await page.getByRole('button', { name: 'Flow events' }).click();
  await page.getByRole('button', { name: 'All', exact: true }).click();
  await page.keyboard.press('Escape');
  await page.mouse.click(opts.width / 2, 8); // closes the dropdown if Escape did not
  const chosen = await page.evaluate(([start, span]) => {
    const tv = document.querySelector('tr-ui-timeline-view');
    const m = tv.model;
    // The viewer's times are milliseconds from the trace's first event (it shifts them to 0).
    const procs = [];
    for (const p of Object.values(m.processes)) {
      for (const t of Object.values(p.threads)) {
        if (/^processor /.test(t.name)) {
          procs.push(t.sliceGroup.slices.filter((s) => s.category === 'run'));
        }
      }
    }
    const all = procs.flat();
    const t0 = Math.min(...all.map((s) => s.start));
    const len = span / 1000;
    let from;
    if (start !== undefined) {
      from = t0 + start / 1000;
    } else {
      // The window in which the least busy processor is busiest, in steps of a tenth of it.
      const step = len / 10;
      const t1 = Math.max(...all.map((s) => s.end));
      const bins = Math.floor((t1 - t0) / step) + 1;
      const busy = procs.map((runs) => {
        const b = new Float64Array(bins);
        for (const s of runs) b[Math.floor((s.start - t0) / step)] += s.duration;
        return b;
      });
      let best = -1;
      from = t0;
      for (let i = 0; i < Math.max(1, bins - 9); i++) {
        const least = Math.min(...busy.map((b) => b.slice(i, i + 10).reduce((x, y) => x + y, 0)));
        if (least > best) { best = least; from = t0 + i * step; }
      }
    }
    const to = from + len;
    const vp = tv.trackView.viewport;
    const dt = new tr.ui.TimelineDisplayTransform();
    dt.set(vp.currentDisplayTransform);
    dt.xSetWorldBounds(from, to, tv.trackView.modelTrackContainer_.canvas.width);
    vp.setDisplayTransformImmediately(dt);
    // A run in the middle third of the window that a wake-up on another processor led to.
    const mid = [from + len / 3, from + 2 * len / 3];
    const f = m.flowEvents.find((x) => x.endSlice && x.startSlice && x.title === 'wake' &&
      x.end >= mid[0] && x.end <= mid[1] &&
      x.startSlice.parentContainer !== x.endSlice.parentContainer) ||
      m.flowEvents.find((x) => x.endSlice && x.end >= from && x.end <= to);
    let sel = 'nothing';
    if (f) {
      tv.brushingStateController.changeSelectionFromTimeline(new tr.model.EventSet([f.endSlice]));
      vp.setDisplayTransformImmediately(dt);
      sel = `${f.endSlice.title}, ${((f.end - from) * 1000).toFixed(0)} us into the window`;
    }
    return `${((from - t0) * 1000).toFixed(0)} us from the first run, ${span} us; ` +
      `selected: ${sel}`;
  }, [opts.start, opts.span]);
  console.log(`window: ${chosen}`);
  // (The floating mouse-mode palette would sit over the tracks.)
  await page.evaluate(() => Array.from(document.querySelectorAll('tr-ui-b-mouse-mode-selector'))
    .forEach((e) => { e.style.display = 'none'; }));
  await page.waitForTimeout(1000);
  await page.screenshot({ path: outPath });
  console.log(`screenshot: ${outPath}`);
} catch (e) {
  fail(e.message);
} finally {
  await ctx.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
