/** The live dashboard's page. */
/**
 * One HTML document with its CSS and script inline (no build step, no CDN), which asks for the admin token and polls
 * `/admin/stats` every second.
 */

/** The page's style sheet; the Content-Security-Policy allows it by its hash. */
export const DASHBOARD_STYLE = `
:root { color-scheme: light dark; --fg: #1b1b1b; --bg: #fff; --line: #c8c8c8; --muted: #555; --warn: #8a2500; }
@media (prefers-color-scheme: dark) { :root { --fg: #eee; --bg: #161616; --line: #444; --muted: #bbb; --warn: #ffb08a; } }
body { font: 15px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); margin: 0 auto; padding: 1rem; max-width: 64rem; }
h1 { font-size: 1.4rem; margin: 0; } h2 { font-size: 1.15rem; margin: 1.5rem 0 .5rem; } h3 { font-size: 1rem; }
header { display: flex; flex-wrap: wrap; gap: .5rem 1.5rem; align-items: baseline; border-bottom: 1px solid var(--line); padding-bottom: .5rem; }
table { border-collapse: collapse; width: 100%; margin-bottom: 1rem; }
caption { text-align: left; color: var(--muted); padding-bottom: .25rem; }
th, td { border-bottom: 1px solid var(--line); padding: .3rem .5rem; text-align: left; vertical-align: top; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
code { word-break: break-all; }
button, input, select { font: inherit; padding: .25rem .6rem; }
label { margin-right: .3rem; }
:focus-visible { outline: 3px solid #1a66d2; outline-offset: 2px; }
.warn { color: var(--warn); font-weight: 600; }
.muted { color: var(--muted); }
#login-error { color: var(--warn); font-weight: 600; }
`;

/** The page's script; the Content-Security-Policy allows it by its hash. It writes data with textContent only: keys come from clients. */
export const DASHBOARD_SCRIPT = `
'use strict';
const STORE_KEY = 'floodgate-admin-token';
const $ = (id) => document.getElementById(id);
let prev = undefined;
let timer = undefined;
let failing = false;
let limitedShown = '';
let rulesShown = '';
// Bumped when the token changes or is forgotten: a poll or action begun under another token drops its answer.
let generation = 0;
let paused = false;

class TokenRefused extends Error {}

async function api(method, path) {
  const res = await fetch(path, { method, cache: 'no-store', headers: { Authorization: 'Bearer ' + sessionStorage.getItem(STORE_KEY) } });
  if (res.status === 401) throw new TokenRefused('token refused');
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error || 'HTTP ' + res.status);
  return body;
}

function say(text) { $('status').textContent = text; }

// A path segment: keys . and .. as "=" + base64url, since URL parsers drop dot segments (%2E too); the API reads both forms.
function seg(text) {
  if (text === '.' || text === '..') return '=' + btoa(text).replace(/=+$/, '');
  return encodeURIComponent(text);
}
// Rule name -> its policies' names, from the last stats read: only these have counts to reset (not an in-flight limit).
let policiesOf = new Map();

// The first cell heads its row; cells from index numbersFrom on are numbers, aligned right.
function row(cells, data, numbersFrom) {
  const tr = document.createElement('tr');
  for (const [k, v] of Object.entries(data)) tr.dataset[k] = v;
  cells.forEach((c, i) => {
    const td = document.createElement(i === 0 ? 'th' : 'td');
    if (i === 0) td.scope = 'row';
    if (c instanceof Node) td.append(c); else td.textContent = String(c);
    if (numbersFrom !== undefined && i >= numbersFrom) td.className = 'num';
    tr.append(td);
  });
  return tr;
}

function emptyRow(text, span) {
  const tr = document.createElement('tr');
  const td = document.createElement('td');
  td.colSpan = span;
  td.textContent = text;
  tr.append(td);
  return tr;
}

function num(n, digits) { return Number.isFinite(n) ? n.toLocaleString('en', { maximumFractionDigits: digits || 0 }) : '—'; }

function renderDecisions(s, dt) {
  const before = new Map((prev ? prev.decisions : []).map((d) => [d.rule + '\\0' + d.outcome, d.count]));
  const shown = s.decisions
    .filter((d) => d.count > 0 || d.outcome === 'allowed' || d.outcome === 'limited')
    .sort((a, b) => (a.rule + '\\0' + a.outcome < b.rule + '\\0' + b.outcome ? -1 : 1));
  $('decisions').tBodies[0].replaceChildren(...shown.map((d) => {
    // A series missing from the previous read had counted nothing yet: series appear with their first decision.
    const was = before.get(d.rule + '\\0' + d.outcome) || 0;
    const rate = dt > 0 ? (d.count - was) / dt : NaN;
    const tr = row([d.rule, d.outcome, num(d.count), num(rate, 1)], { rule: d.rule, outcome: d.outcome }, 2);
    tr.cells[2].classList.add('total');
    tr.cells[3].classList.add('rate');
    return tr;
  }));
}

function actionButton(rule, policy, key, action) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = action === 'reset' ? 'Reset' : 'Unblock';
  b.setAttribute('aria-label', b.textContent + ' key ' + key + ' under policy ' + policy + ' of rule ' + rule);
  Object.assign(b.dataset, { rule, policy, key, action });
  b.addEventListener('click', () => act(rule, policy, key, action));
  return b;
}

function renderLimited(s) {
  const text = JSON.stringify(s.limited);
  if (text === limitedShown) return;
  limitedShown = text;
  const body = $('limited').tBodies[0];
  const focused = body.contains(document.activeElement) ? Object.assign({}, document.activeElement.dataset) : undefined;
  const rows = [];
  for (const r of s.limited.rules) for (const k of r.keys) {
    const code = document.createElement('code');
    code.textContent = k.key;
    const buttons = document.createElement('span');
    // The policy that refused: the same key is another client under another policy's key (an address, the global key).
    if ((policiesOf.get(r.rule) || []).includes(k.policy))
      buttons.append(actionButton(r.rule, k.policy, k.key, 'reset'), ' ', actionButton(r.rule, k.policy, k.key, 'unblock'));
    else buttons.textContent = 'in-flight limit: its slots end with their requests';
    const tr = row([r.rule, k.policy, code, num(k.refusals), buttons], { rule: r.rule, policy: k.policy, key: k.key });
    tr.cells[3].className = 'num';
    rows.push(tr);
  }
  if (rows.length === 0) rows.push(emptyRow('No key refused in the last ' + s.limited.minutes + ' minutes.', 5));
  body.replaceChildren(...rows);
  $('limited').caption.textContent = 'Keys refused most in the last ' + s.limited.minutes + ' minutes, per rule and the policy that refused them';
  // A refresh must not throw the keyboard user's focus back to the top of the page.
  if (focused && focused.key !== undefined)
    for (const b of body.querySelectorAll('button'))
      if (b.dataset.rule === focused.rule && b.dataset.policy === focused.policy && b.dataset.key === focused.key && b.dataset.action === focused.action) b.focus();
}

function bound(buckets, count, q) {
  if (!(count > 0)) return '—';
  for (const b of buckets) if (b.count >= q * count) return '≤ ' + num(b.le * 1000, 2);
  return '> ' + num(buckets[buckets.length - 1].le * 1000, 2);
}

function renderStore(s, dt) {
  $('store-desc').textContent = s.store.description + ': ' + (s.store.connected ? 'connected' : 'NOT connected');
  $('store-desc').className = s.store.connected ? '' : 'warn';
  const before = new Map((prev ? prev.store.latency : []).map((l) => [l.store + '\\0' + l.result, l]));
  const rows = s.store.latency.map((l) => {
    const p = before.get(l.store + '\\0' + l.result) || { count: 0, sumSeconds: 0, buckets: l.buckets.map((b) => ({ le: b.le, count: 0 })) };
    const calls = l.count - p.count;
    const buckets = l.buckets.map((b, i) => ({ le: b.le, count: b.count - (p.buckets[i] ? p.buckets[i].count : 0) }));
    const mean = calls > 0 ? ((l.sumSeconds - p.sumSeconds) / calls) * 1000 : NaN;
    return row([l.store, l.result, num(prev && dt > 0 ? calls / dt : NaN, 1), num(mean, 3), bound(buckets, calls, 0.5), bound(buckets, calls, 0.99)], { store: l.store, result: l.result }, 2);
  });
  if (rows.length === 0) rows.push(emptyRow('No store call timed: ' + (s.store.description.startsWith('memory') ? 'the embedded memory store answers in the process.' : 'none made yet.'), 6));
  $('latency').tBodies[0].replaceChildren(...rows);
  const health = [];
  for (const r of s.rules) for (const p of r.policies) {
    const breaker = p.breaker === 'open' ? 'OPEN (probe in ' + num(p.retryInMs) + ' ms)' : p.breaker;
    const tr = row([r.rule, p.policy, breaker, p.fallback, p.fallbackInUse ? 'yes: the fallback answers' : 'no'], { rule: r.rule, policy: p.policy });
    if (p.breaker === 'open' || p.breaker === 'probing') tr.cells[2].className = 'warn';
    if (p.fallbackInUse) tr.cells[4].className = 'warn';
    health.push(tr);
  }
  $('health').tBodies[0].replaceChildren(...health);
}

function options(select, names) {
  const chosen = select.value;
  select.replaceChildren(...names.map((n) => { const o = document.createElement('option'); o.textContent = n; return o; }));
  if (names.includes(chosen)) select.value = chosen;
}

function renderPolicies() { options($('key-policy'), policiesOf.get($('key-rule').value) || []); }

function renderRules(s) {
  policiesOf = new Map(s.rules.map((r) => [r.rule, r.policies.map((p) => p.policy)]));
  const shown = JSON.stringify([...policiesOf]);
  if (shown === rulesShown) return;
  rulesShown = shown;
  options($('key-rule'), s.rules.map((r) => r.rule));
  renderPolicies();
}

async function poll() {
  timer = undefined;
  const mine = generation;
  try {
    const s = await api('GET', '/admin/stats');
    if (mine !== generation) return;
    const dt = prev ? (s.at - prev.at) / 1000 : NaN;
    renderRules(s);
    renderDecisions(s, dt);
    renderLimited(s);
    renderStore(s, dt);
    prev = s;
    $('updated').textContent = 'Last update: ' + new Date(s.at).toLocaleTimeString() + '.';
    $('updated').dataset.at = String(s.at);
    if ($('board').hidden) { $('login').hidden = true; $('board').hidden = false; say('Connected; the numbers update every second.'); }
    else if (failing) say('Connected again.');
    failing = false;
  } catch (error) {
    if (mine !== generation) return;
    if (error instanceof TokenRefused) return signOut('The gateway refused this token (401 Unauthorized). Check the admin token and try again.');
    if (!failing) say('Cannot read the stats: ' + error.message + '. Retrying every second.');
    failing = true;
  }
  timer = setTimeout(poll, 1000);
}

async function act(rule, policy, key, action) {
  const where = ' under policy ' + policy + ' of rule ' + rule;
  try {
    await api('POST', '/admin/rules/' + seg(rule) + '/policies/' + seg(policy) + '/keys/' + seg(key) + '/' + action);
    say('Key ' + key + (action === 'reset' ? ' reset' : ' unblocked') + where + '.');
  } catch (error) {
    if (error instanceof TokenRefused) return signOut('The gateway refused this token (401 Unauthorized).');
    say('Could not ' + action + ' key ' + key + where + ': ' + error.message);
  }
}

function stop() {
  generation += 1;
  if (timer !== undefined) clearTimeout(timer);
  timer = undefined;
}

function signOut(message) {
  stop();
  sessionStorage.removeItem(STORE_KEY);
  prev = undefined; limitedShown = ''; rulesShown = '';
  setPaused(false);
  $('board').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message;
  say(message ? 'Not connected.' : 'Token forgotten.');
  $('token').focus();
}

$('login').addEventListener('submit', (event) => {
  event.preventDefault();
  sessionStorage.setItem(STORE_KEY, $('token').value);
  $('token').value = '';
  $('login-error').textContent = '';
  say('Connecting…');
  stop();
  poll();
});
$('forget').addEventListener('click', () => signOut(''));
function setPaused(on) {
  paused = on;
  $('pause').setAttribute('aria-pressed', String(on));
  $('paused').hidden = !on;
}
// Numbers that change every second must be stoppable (WCAG 2.2.2), e.g. to read a table with a screen reader.
$('pause').addEventListener('click', () => {
  setPaused(!paused);
  stop();
  if (paused) say('Updates paused.');
  else { say('Updates resumed.'); poll(); }
});
// Enter in the key field would submit the form (and leave the page); the buttons act instead.
$('key-form').addEventListener('submit', (event) => event.preventDefault());
for (const action of ['reset', 'unblock'])
  $('key-' + action).addEventListener('click', () => {
    const key = $('key-name').value;
    if (key === '') { say('Type a key first.'); $('key-name').focus(); return; }
    act($('key-rule').value, $('key-policy').value, key, action);
  });
$('key-rule').addEventListener('change', renderPolicies);
if (sessionStorage.getItem(STORE_KEY) !== null) poll();
`;

/** The whole page. */
export function dashboardHtml(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>floodgate dashboard</title>
<style>${DASHBOARD_STYLE}</style>
</head>
<body>
<header>
<h1>floodgate dashboard</h1>
<p id="status" role="status" aria-live="polite">Not connected.</p>
</header>
<main>
<noscript><p>This page needs JavaScript to read the gateway's numbers.</p></noscript>
<form id="login">
<h2>Admin token</h2>
<p>The numbers on this page need the gateway's admin token. It is kept in this tab's session storage and sent only to this gateway.</p>
<p><label for="token">Admin token</label> <input id="token" type="password" autocomplete="current-password" required> <button type="submit">Connect</button></p>
<p id="login-error" role="alert"></p>
</form>
<div id="board" hidden>
<p><span id="updated" class="muted"></span> <strong id="paused" hidden>Paused.</strong>
<button id="pause" type="button" aria-pressed="false">Pause updates</button> <button id="forget" type="button">Forget token</button></p>
<section aria-labelledby="h-decisions">
<h2 id="h-decisions">Decisions</h2>
<table id="decisions">
<caption>Decisions per rule and outcome: total since the gateway started, and per second since the previous update</caption>
<thead><tr><th scope="col">Rule</th><th scope="col">Outcome</th><th scope="col" class="num">Total</th><th scope="col" class="num">Per second</th></tr></thead>
<tbody></tbody>
</table>
</section>
<section aria-labelledby="h-limited">
<h2 id="h-limited">Most-limited keys</h2>
<table id="limited">
<caption>Keys refused most, per rule and the policy that refused them</caption>
<thead><tr><th scope="col">Rule</th><th scope="col">Policy</th><th scope="col">Key</th><th scope="col" class="num">Refusals</th><th scope="col">Actions</th></tr></thead>
<tbody></tbody>
</table>
<form id="key-form">
<h3>Reset or unblock any key</h3>
<p><label for="key-rule">Rule</label> <select id="key-rule"></select>
<label for="key-policy">Policy</label> <select id="key-policy"></select>
<label for="key-name">Key</label> <input id="key-name" type="text" autocomplete="off" spellcheck="false">
<button id="key-reset" type="button">Reset</button> <button id="key-unblock" type="button">Unblock</button></p>
<p class="muted">Reset forgets the key's counts and blocks under the policy; unblock lifts a block and keeps the counts. A key is acted on under the one policy chosen: the same key may be another client under a policy keyed by address or the global key.</p>
</form>
</section>
<section aria-labelledby="h-store">
<h2 id="h-store">Store</h2>
<p id="store-desc"></p>
<table id="latency">
<caption>Store call latency since the previous update (bounds in ms are the histogram's buckets)</caption>
<thead><tr><th scope="col">Store</th><th scope="col">Result</th><th scope="col" class="num">Calls per second</th><th scope="col" class="num">Mean ms</th><th scope="col" class="num">p50 ms</th><th scope="col" class="num">p99 ms</th></tr></thead>
<tbody></tbody>
</table>
<table id="health">
<caption>Circuit breaker and fallback per rule and policy</caption>
<thead><tr><th scope="col">Rule</th><th scope="col">Policy</th><th scope="col">Breaker</th><th scope="col">Fallback</th><th scope="col">Fallback in use</th></tr></thead>
<tbody></tbody>
</table>
</section>
</div>
</main>
<script>${DASHBOARD_SCRIPT}</script>
</body>
</html>
`;
}
