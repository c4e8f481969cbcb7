// The Takoform console: a client of this Host's HTTP API only (Host API v2 and /ext/queues/v1).
// Everything is built with DOM calls and textContent, never HTML strings: message previews and
// names come from users. The API key lives in this tab's sessionStorage and nowhere else.

const KEY_STORE = 'takoform.console.key';
/** The origin root, or the stage prefix in front of `/console` (execute-api URLs). */
const ROOT = new URL('.', window.location.href);
const API = new URL('apis/forms.takoform.com/v2/', ROOT);
const EXT = new URL('ext/queues/v1/', ROOT);
const REFRESH_MS = 10_000;
const MAX_PAGES = 10;
const PARALLEL = 6;
const PEEK_LIMIT = 10;
const CHART_WINDOW_MS = 3_600_000;
const SVG = 'http://www.w3.org/2000/svg';

const $ = (id) => document.getElementById(id);

class SignedOut extends Error {}

// --- talking to the Host ------------------------------------------------------------------

async function call(base, path, body) {
  const key = sessionStorage.getItem(KEY_STORE);
  if (!key) throw new SignedOut('not signed in');
  const headers = { authorization: `Bearer ${key}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(new URL(path, base), {
    method: body === undefined ? 'GET' : 'POST',
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
    credentials: 'omit',
    redirect: 'error',
  });
  const answer = await res.json().catch(() => undefined);
  if (res.status === 401) throw new SignedOut('the Host refused this key');
  if (!res.ok) throw new Error(`${answer?.code ?? res.status}${answer?.detail ? `: ${answer.detail}` : ''}`);
  return answer;
}

/** Runs `fn` over `items`, at most PARALLEL at a time, keeping the order. */
async function mapBounded(items, fn) {
  const out = new Array(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(PARALLEL, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]).catch((err) =>
        err instanceof SignedOut ? Promise.reject(err) : { error: err },
      );
    }
  });
  await Promise.all(workers);
  return out;
}

async function listResources() {
  const items = [];
  let cursor;
  for (let page = 0; page < MAX_PAGES; page++) {
    const q = new URLSearchParams({ limit: '100' });
    if (cursor) q.set('cursor', cursor);
    const r = await call(API, `resources?${q}`);
    items.push(...r.items);
    cursor = r.nextCursor;
    if (!cursor) break;
  }
  return items;
}

/** `AtLeastOnceQueue`, `QueueConsumer`, `ModuleWorker` (or the Form URL's last name). */
function kindOf(form) {
  const m = /\/forms\/([^/]+)\//.exec(form);
  return m ? m[1] : form;
}

// --- formatting ---------------------------------------------------------------------------

function age(seconds) {
  if (seconds === null || seconds === undefined) return '–';
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${Math.round(seconds / 3600)} h`;
}

function time(ms) {
  if (!ms) return '–';
  return new Date(ms).toLocaleTimeString();
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === 'class') e.className = v;
    else e.setAttribute(k, String(v));
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c ?? ''));
  return e;
}

/** A cell whose `data-field` lets tests and scripts read the figure it shows. */
const cell = (field, text, cls) => el('td', { 'data-field': field, class: cls }, text);

function fill(tableId, rows, emptyText) {
  const body = $(tableId).tBodies[0];
  const width = $(tableId).tHead.rows[0].cells.length;
  body.replaceChildren(
    ...(rows.length ? rows : [el('tr', {}, el('td', { colspan: width, class: 'empty' }, emptyText))]),
  );
}

// --- the dashboard ------------------------------------------------------------------------

const state = { resources: [], byUid: new Map(), history: new Map(), chartQueue: '' };

const nameOf = (uid) => state.byUid.get(uid)?.name ?? uid ?? '–';

function renderQueues(queues, stats) {
  fill(
    'queues',
    queues.map((q, i) => {
      const s = stats[i];
      if (!s || s.error) {
        return el(
          'tr',
          { 'data-uid': q.uid },
          cell('name', q.name),
          cell('space', q.space),
          el('td', { colspan: 5, class: 'empty' }, s?.error?.message ?? 'no counts'),
        );
      }
      return el(
        'tr',
        { 'data-uid': q.uid },
        cell('name', q.name),
        cell('space', q.space),
        cell('visible', s.visible, 'num'),
        cell('inFlight', s.inFlight, 'num'),
        cell('delayed', s.delayed, 'num'),
        cell('oldestAge', age(s.oldestAgeSeconds), 'num'),
        cell('consumer', s.consumerUid ? nameOf(s.consumerUid) : '–'),
      );
    }),
    'No queues yet.',
  );
}

function settingsText(s) {
  if (!s) return '–';
  return `batch ≤ ${s.maxBatchSize} / ${s.maxBatchTimeoutSeconds} s, retries ${s.maxRetries} after ${s.retryDelaySeconds} s`;
}

/** Every consumer's entries of `key` in its state (held slots, recent batches), each with its consumer. */
const perConsumer = (consumers, states, key) =>
  consumers.flatMap((c, i) => (states[i]?.[key] ?? []).map((b) => ({ consumer: c, ...b })));

/** A batch's row: its consumer and id, then `rest`. */
const batchRow = (b, ...rest) =>
  el(
    'tr',
    { 'data-batch': b.batchId },
    cell('consumer', b.consumer.name),
    cell('batch', b.batchId, 'mono'),
    ...rest,
  );

function renderConsumers(consumers, states) {
  fill(
    'consumers',
    consumers.map((c, i) => {
      const s = states[i];
      const spec = c.spec ?? {};
      const running = s && !s.error ? `${s.runningBatches} ÷ ${s.maxConcurrency ?? '–'}` : '–';
      return el(
        'tr',
        { 'data-uid': c.uid },
        cell('name', c.name),
        cell('queue', nameOf(spec.queue?.resourceUid)),
        cell('worker', nameOf(spec.worker?.resourceUid)),
        cell('state', s?.state ?? s?.error?.message ?? '–', s?.state ? `state-${s.state}` : undefined),
        cell('running', running, 'num'),
        cell('slotsHeld', s?.slotsHeld ?? '–', 'num'),
        cell('settings', settingsText(s?.settings)),
        cell('deadLetterQueue', spec.deadLetterQueue ? nameOf(spec.deadLetterQueue.resourceUid) : '–'),
      );
    }),
    'No consumers yet.',
  );
  fill(
    'batches',
    perConsumer(consumers, states, 'batches').map((b) =>
      batchRow(
        b,
        cell('state', b.running ? 'handler running' : 'gathering'),
        cell('deadline', time(b.deadline)),
      ),
    ),
    'No batch is in flight.',
  );
  // Newest first across consumers; each consumer's state lists its last 20.
  const recent = perConsumer(consumers, states, 'recentBatches')
    .sort((x, y) => y.endedAt - x.endedAt)
    .slice(0, 50);
  fill(
    'recent-batches',
    recent.map((b) =>
      batchRow(
        b,
        cell('outcome', b.outcome, `outcome-${b.outcome}`),
        cell('messages', b.messages, 'num'),
        cell('acknowledged', b.acknowledged, 'num'),
        cell('retried', b.retried, 'num'),
        cell('exhausted', b.exhausted, 'num'),
        cell(
          'attempts',
          b.attempts
            ? b.attempts.min === b.attempts.max
              ? b.attempts.max
              : `${b.attempts.min}–${b.attempts.max}`
            : '–',
          'num',
        ),
        cell('duration', b.durationMs === null ? '–' : `${b.durationMs} ms`, 'num'),
        cell('ended', time(b.endedAt)),
        cell('error', b.error ? `${b.error.name}: ${b.error.message}` : '–'),
      ),
    ),
    'No batch has finished yet.',
  );
}

function renderOperations(resources, operations) {
  fill(
    'operations',
    resources.map((r, i) => {
      const op = operations[i];
      const ok = op && !op.error;
      return el(
        'tr',
        { 'data-uid': r.uid },
        cell('name', `${r.space}/${r.name}`),
        cell('kind', kindOf(r.form)),
        cell('phase', r.phase, `phase-${r.phase}`),
        cell('operation', r.lastOperation ?? '–', 'mono'),
        cell('action', ok ? op.action : '–'),
        cell('status', ok ? op.status : (op?.error?.message ?? '–'), ok ? `status-${op.status}` : undefined),
        cell('updated', ok ? time(Date.parse(op.updatedAt) || op.updatedAt) : '–'),
      );
    }),
    'No Resources yet.',
  );
}

async function peekDeadLetters() {
  const consumers = state.resources.filter((r) => kindOf(r.form) === 'QueueConsumer');
  const dlqs = [...new Set(consumers.map((c) => c.spec?.deadLetterQueue?.resourceUid).filter(Boolean))];
  const peeks = await mapBounded(dlqs, (uid) =>
    call(EXT, `queues/${encodeURIComponent(uid)}/peek`, { limit: PEEK_LIMIT }),
  );
  const rows = dlqs.flatMap((uid, i) => {
    const p = peeks[i];
    if (!p || p.error)
      return [
        el(
          'tr',
          {},
          cell('queue', nameOf(uid)),
          el('td', { colspan: 7, class: 'empty' }, p?.error?.message ?? 'no answer'),
        ),
      ];
    return p.messages.map((m) => {
      const d = m.deadLetter;
      return el(
        'tr',
        { 'data-message': m.id ?? '' },
        cell('queue', nameOf(uid)),
        cell('id', m.id ?? '(not written by this Host)', 'mono'),
        cell('preview', m.preview, 'mono'),
        cell('sourceQueue', d ? d.sourceQueueName : '–'),
        cell('originalId', d ? d.originalId : '–', 'mono'),
        cell('attempts', d ? d.attempts : '–', 'num'),
        cell('lastOutcome', d ? d.lastOutcome : '–'),
        cell('movedAt', d ? time(d.movedAt) : '–'),
      );
    });
  });
  fill(
    'dead-letters',
    rows,
    dlqs.length ? 'The dead-letter queues are empty.' : 'No consumer has a dead-letter queue.',
  );
}

// --- the chart ----------------------------------------------------------------------------

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

function renderChart(view) {
  const box = $('chart');
  const note = $('chart-note');
  const samples = view?.samples ?? [];
  const W = 900;
  const H = 200;
  const pad = { l: 40, r: 10, t: 10, b: 22 };
  const now = Date.now();
  const x = (at) => pad.l + ((at - (now - CHART_WINDOW_MS)) / CHART_WINDOW_MS) * (W - pad.l - pad.r);
  const backlog = (s) => s.visible + s.inFlight + s.delayed;
  const top = Math.max(1, ...samples.map(backlog), ...samples.map((s) => s.acknowledged));
  const y = (v) => H - pad.b - (v / top) * (H - pad.t - pad.b);
  const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, 'data-samples': samples.length });
  chart.append(svg('line', { class: 'axis', x1: pad.l, x2: W - pad.r, y1: H - pad.b, y2: H - pad.b }));
  chart.append(svg('line', { class: 'axis', x1: pad.l, x2: pad.l, y1: pad.t, y2: H - pad.b }));
  const label = (text, lx, ly, anchor) => {
    const t = svg('text', { x: lx, y: ly, 'text-anchor': anchor });
    t.textContent = text;
    chart.append(t);
  };
  label(String(top), pad.l - 4, pad.t + 8, 'end');
  label('0', pad.l - 4, H - pad.b, 'end');
  label('60 min ago', pad.l, H - 6, 'start');
  label('30 min', (pad.l + W - pad.r) / 2, H - 6, 'middle');
  label('now', W - pad.r, H - 6, 'end');
  const barWidth = Math.max(
    2,
    ((view?.intervalSeconds ?? 15) * 1000 * (W - pad.l - pad.r)) / CHART_WINDOW_MS - 1,
  );
  for (const s of samples) {
    if (s.acknowledged > 0) {
      chart.append(
        svg('rect', {
          class: 'acked',
          x: x(s.at) - barWidth,
          y: y(s.acknowledged),
          width: barWidth,
          height: H - pad.b - y(s.acknowledged),
        }),
      );
    }
  }
  if (samples.length > 0) {
    chart.append(
      svg('polyline', {
        class: 'backlog',
        points: samples.map((s) => `${x(s.at).toFixed(1)},${y(backlog(s)).toFixed(1)}`).join(' '),
      }),
    );
  }
  box.replaceChildren(chart);
  if (!view) note.textContent = 'Choose a queue.';
  else if (!view.available) note.textContent = 'This Host keeps no history of queue counts.';
  else if (samples.length === 0)
    note.textContent = `No samples yet: the Host samples every ${view.intervalSeconds} s while it runs.`;
  else {
    const acked = samples.reduce((n, s) => n + s.acknowledged, 0);
    note.textContent = `${samples.length} samples, every ${view.intervalSeconds} s since ${time(samples[0].at)}; ${acked} messages acknowledged in that time.`;
  }
}

async function refreshChart(queues) {
  const select = $('chart-queue');
  if (!queues.some((q) => q.uid === state.chartQueue)) state.chartQueue = queues[0]?.uid ?? '';
  select.replaceChildren(...queues.map((q) => el('option', { value: q.uid }, `${q.space}/${q.name}`)));
  select.value = state.chartQueue;
  renderChart(
    state.chartQueue ? await call(EXT, `queues/${encodeURIComponent(state.chartQueue)}/history`) : undefined,
  );
}

// --- refresh cycle ------------------------------------------------------------------------

let timer;

async function refresh({ peek = false } = {}) {
  clearTimeout(timer);
  try {
    state.resources = await listResources();
    state.byUid = new Map(state.resources.map((r) => [r.uid, r]));
    const queues = state.resources.filter((r) => kindOf(r.form) === 'AtLeastOnceQueue');
    const consumers = state.resources.filter((r) => kindOf(r.form) === 'QueueConsumer');
    const [stats, states, operations] = await Promise.all([
      mapBounded(queues, (q) => call(EXT, `queues/${encodeURIComponent(q.uid)}/stats`)),
      mapBounded(consumers, (c) => call(EXT, `consumers/${encodeURIComponent(c.uid)}/state`)),
      mapBounded(state.resources, (r) =>
        r.lastOperation
          ? call(API, `operations/${encodeURIComponent(r.lastOperation)}`)
          : Promise.resolve(undefined),
      ),
    ]);
    renderQueues(queues, stats);
    renderConsumers(consumers, states);
    renderOperations(state.resources, operations);
    await refreshChart(queues);
    if (peek) await peekDeadLetters();
    $('updated').textContent = `Updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    if (err instanceof SignedOut) return signOut(err.message);
    $('updated').textContent = `Refresh failed: ${err.message}`;
  }
  if ($('auto').checked) timer = setTimeout(() => refresh(), REFRESH_MS);
}

// --- signing in and out -------------------------------------------------------------------

function show(signedIn) {
  $('sign-in').hidden = signedIn;
  $('dashboard').hidden = !signedIn;
  $('sign-out').hidden = !signedIn;
}

function signOut(message = '') {
  clearTimeout(timer);
  sessionStorage.removeItem(KEY_STORE);
  $('who').textContent = '';
  $('sign-in-error').textContent = message;
  show(false);
}

async function enter() {
  try {
    const me = await call(EXT, 'me');
    $('who').textContent = `signed in as ${me.principal}`;
    show(true);
    await refresh({ peek: true });
  } catch (err) {
    signOut(
      err instanceof SignedOut ? 'The Host refused this key.' : `Cannot reach the Host: ${err.message}`,
    );
  }
}

$('sign-in-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const key = $('api-key').value.trim();
  $('api-key').value = '';
  if (!/^[\x21-\x7e]{1,512}$/.test(key)) {
    $('sign-in-error').textContent = 'An API key is 1 to 512 visible ASCII characters.';
    return;
  }
  sessionStorage.setItem(KEY_STORE, key);
  $('sign-in-error').textContent = '';
  void enter();
});
$('sign-out').addEventListener('click', () => signOut());
$('refresh').addEventListener('click', () => refresh({ peek: true }));
$('peek').addEventListener('click', () =>
  peekDeadLetters().catch((err) => ($('updated').textContent = err.message)),
);
$('auto').addEventListener('change', () => ($('auto').checked ? refresh() : clearTimeout(timer)));
$('chart-queue').addEventListener('change', (event) => {
  state.chartQueue = event.target.value;
  call(EXT, `queues/${encodeURIComponent(state.chartQueue)}/history`).then(
    renderChart,
    (err) => ($('chart-note').textContent = err.message),
  );
});

if (sessionStorage.getItem(KEY_STORE)) void enter();
else show(false);
