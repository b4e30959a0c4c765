// The /web page: one browser tab = one WebSocket = one environment session.
// Plain browser JavaScript, no build step, no external requests.
(function () {
  'use strict';

  const $ = (id) => document.getElementById(id);
  const apiKey = new URLSearchParams(location.search).get('api_key');
  const keyQuery = apiKey ? '?api_key=' + encodeURIComponent(apiKey) : '';
  const argumentHints = {
    DESCRIBE: 'table name',
    SAMPLE: 'table name',
    QUERY: 'SELECT ... (read-only SQL)',
    ANSWER: 'the answer value (lists: a, b; tables: one row per line, cells separated by |)',
  };

  let ws = null;
  let pending = []; // FIFO of {resolve, reject}: the server answers requests in order, one reply each.
  let actionType = 'DESCRIBE';
  let catalog = { databases: [], questions: [] };
  let history = [];
  let runningTotal = 0;
  let episodeOpen = false;

  // ---- connection --------------------------------------------------------
  function connect() {
    return new Promise((resolve, reject) => {
      const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
      const socket = new WebSocket(proto + '//' + location.host + '/ws' + keyQuery);
      let opened = false;
      socket.onopen = () => {
        opened = true;
        ws = socket;
        setConnection(true);
        resolve(socket);
      };
      socket.onmessage = (event) => onFrame(event.data);
      socket.onclose = (event) => {
        if (ws === socket) ws = null;
        setConnection(false, event.code);
        const waiting = pending;
        pending = [];
        waiting.forEach((p) => p.reject(new Error('connection closed (code ' + event.code + ')')));
        if (!opened) reject(new Error('could not connect to /ws'));
        episodeOpen = false;
        updateButtons();
      };
    });
  }

  function onFrame(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch (e) {
      showRequestError('Unreadable frame from server: ' + e.message);
      return;
    }
    $('raw').textContent = JSON.stringify(frame, null, 2);
    const waiter = pending.shift();
    if (frame.type === 'error') {
      const d = frame.data || {};
      let message = d.message + ' (' + d.code + ')';
      if (Array.isArray(d.errors) && d.errors.length) message += '\n' + d.errors.map((e) => (e.loc || []).join('.') + ': ' + e.msg).join('\n');
      if (waiter) waiter.reject(new Error(message));
      else showRequestError(message); // a session-ending frame (idle timeout, shutdown)
      return;
    }
    if (waiter) waiter.resolve(frame);
  }

  async function request(frame) {
    if (!ws || ws.readyState !== WebSocket.OPEN) await connect();
    return new Promise((resolve, reject) => {
      pending.push({ resolve, reject });
      ws.send(JSON.stringify(frame));
    });
  }

  function setConnection(on, code) {
    const el = $('connection');
    el.className = 'pill ' + (on ? 'on' : 'off');
    el.textContent = on ? 'connected' : 'disconnected' + (code ? ' (' + code + ')' : '');
  }

  // ---- catalog -----------------------------------------------------------
  async function loadCatalog() {
    try {
      const res = await fetch('/web/catalog' + keyQuery);
      if (!res.ok) throw new Error('HTTP ' + res.status);
      catalog = await res.json();
    } catch (e) {
      showRequestError('Could not load the catalog: ' + e.message);
      return;
    }
    const dbSelect = $('db-select');
    for (const db of catalog.databases) dbSelect.appendChild(option(db, db));
    fillQuestions();
  }

  function fillQuestions() {
    const db = $('db-select').value;
    const select = $('question-select');
    const keep = select.value;
    select.replaceChildren(option('', 'random (seeded)'));
    for (const q of catalog.questions) {
      if (db && q.db_id !== db) continue;
      const text = q.question.length > 90 ? q.question.slice(0, 87) + '...' : q.question;
      select.appendChild(option(q.question_id, q.question_id + ' — ' + text));
    }
    if ([...select.options].some((o) => o.value === keep)) select.value = keep;
  }

  function option(value, label) {
    const o = document.createElement('option');
    o.value = value;
    o.textContent = label;
    return o;
  }

  // ---- actions -----------------------------------------------------------
  async function reset(event) {
    event.preventDefault();
    clearRequestError();
    const data = {};
    const questionId = $('question-select').value;
    const dbId = $('db-select').value;
    const seed = $('seed').value;
    if (questionId) data.question_id = questionId;
    else if (dbId) data.db_id = dbId;
    if (seed !== '') data.seed = Number(seed);
    try {
      const frame = await request({ type: 'reset', data });
      history = [];
      runningTotal = 0;
      episodeOpen = true;
      renderResult(frame.data);
      renderHistory();
      await refreshState();
      $('argument').focus();
    } catch (e) {
      showRequestError(e.message);
    }
    updateButtons();
  }

  async function step(event) {
    if (event) event.preventDefault();
    clearRequestError();
    const argument = $('argument').value;
    const sent = { action_type: actionType, argument };
    try {
      const frame = await request({ type: 'step', data: sent });
      const result = frame.data;
      const reward = typeof result.reward === 'number' ? result.reward : 0;
      runningTotal += reward;
      const obs = result.observation;
      const summary = obs.action_history[obs.action_history.length - 1] || '';
      history.push({ step: obs.step_count, action: sent, reward, total: runningTotal, outcome: summary.split(' -> ').slice(1).join(' -> ') });
      renderResult(result);
      renderHistory();
      if (result.done) episodeOpen = false;
      if (actionType !== 'QUERY' && actionType !== 'ANSWER') $('argument').value = '';
    } catch (e) {
      showRequestError(e.message);
    }
    updateButtons();
  }

  async function refreshState() {
    try {
      const frame = await request({ type: 'state' });
      const s = frame.data;
      $('episode-id').textContent = s.episode_id ? s.episode_id.slice(0, 8) : '—';
      $('episode-id').title = s.episode_id || '';
      $('step-count').textContent = String(s.step_count);
      $('budget').textContent = String(s.budget_remaining);
      $('total-reward').textContent = s.total_reward.toFixed(3);
    } catch (e) {
      showRequestError(e.message);
    }
  }

  function selectAction(type) {
    actionType = type;
    for (const b of document.querySelectorAll('.action-type')) b.classList.toggle('selected', b.dataset.action === type);
    $('argument-label').textContent = 'Argument: ' + argumentHints[type];
    $('argument').placeholder = argumentHints[type];
  }

  function updateButtons() {
    $('step-button').disabled = !episodeOpen;
  }

  // ---- rendering ---------------------------------------------------------
  function renderResult(result) {
    const obs = result.observation;
    $('question').textContent = obs.question;
    $('step-count').textContent = String(obs.step_count);
    $('budget').textContent = String(obs.budget_remaining);
    $('total-reward').textContent = runningTotal.toFixed(3);
    $('done-badge').hidden = !result.done;
    if (result.done) $('done-badge').textContent = 'DONE · total ' + runningTotal.toFixed(3);
    renderSchema(obs.schema_info);
    const errorBox = $('obs-error');
    errorBox.hidden = !obs.error;
    errorBox.textContent = obs.error;
    renderResultText($('result'), obs.result);
  }

  // schema_info: "Tables:" then "- name" or "- name (N rows): col TYPE PK, col TYPE".
  function renderSchema(text) {
    const list = $('schema');
    list.replaceChildren();
    for (const line of text.split('\n')) {
      const m = /^- (.+?)(?: \((\d+) rows\): (.*))?$/.exec(line);
      if (!m) continue;
      const li = document.createElement('li');
      const name = document.createElement('span');
      name.className = 'table-name';
      name.textContent = m[1];
      name.title = 'use as argument';
      name.onclick = () => {
        $('argument').value = m[1];
        $('argument').focus();
      };
      li.appendChild(name);
      if (m[2] !== undefined) {
        li.dataset.described = 'true';
        const rows = document.createElement('span');
        rows.className = 'rows';
        rows.textContent = ' ' + m[2] + ' rows';
        const cols = document.createElement('span');
        cols.className = 'columns';
        cols.textContent = m[3];
        li.append(rows, cols);
      }
      list.appendChild(li);
    }
  }

  // Results are text tables ("a | b" lines, a "(N rows)" note); show them as HTML tables, anything else as text.
  function renderResultText(container, text) {
    container.replaceChildren();
    if (!text) return;
    const lines = text.split('\n');
    const notes = [];
    while (lines.length && /^(\(\d+\+? rows?\)|\(showing .*\)|\.\.\. \(output cut.*|\(0 rows\))$/.test(lines[lines.length - 1])) notes.unshift(lines.pop());
    let caption = null;
    if (lines.length && /^Table .+: \d+ rows, \d+ columns$/.test(lines[0])) caption = lines.shift();
    if (notes.length === 0 || lines.length === 0) {
      const pre = document.createElement('pre');
      pre.textContent = text;
      container.appendChild(pre);
      return;
    }
    if (caption) container.appendChild(div('caption', caption));
    const table = document.createElement('table');
    const head = table.createTHead().insertRow();
    for (const h of splitRow(lines[0])) {
      const th = document.createElement('th');
      th.textContent = h;
      head.appendChild(th);
    }
    const body = table.createTBody();
    for (const line of lines.slice(1)) {
      const tr = body.insertRow();
      for (const cell of splitRow(line)) tr.insertCell().textContent = cell;
    }
    const scroll = div('scroll');
    scroll.appendChild(table);
    container.appendChild(scroll);
    for (const n of notes) container.appendChild(div('note', n));
  }

  // Cells are joined by " | "; a literal pipe inside a cell is written "\|".
  function splitRow(line) {
    return line.split(' | ').map((c) => c.replace(/\\\|/g, '|'));
  }

  function div(cls, text) {
    const d = document.createElement('div');
    d.className = cls;
    if (text !== undefined) d.textContent = text;
    return d;
  }

  function renderHistory() {
    const body = $('history');
    body.replaceChildren();
    for (const h of history) {
      const tr = body.insertRow();
      tr.insertCell().textContent = String(h.step);
      tr.insertCell().textContent = h.action.action_type;
      const arg = tr.insertCell();
      arg.className = 'arg';
      arg.textContent = h.action.argument;
      tr.insertCell().textContent = h.outcome;
      const r = tr.insertCell();
      r.className = 'num ' + (h.reward > 0 ? 'pos' : h.reward < 0 ? 'neg' : '');
      r.textContent = (h.reward >= 0 ? '+' : '') + h.reward.toFixed(3);
      const t = tr.insertCell();
      t.className = 'num';
      t.textContent = h.total.toFixed(3);
    }
  }

  function showRequestError(message) {
    const box = $('request-error');
    box.hidden = false;
    box.textContent = message;
  }

  function clearRequestError() {
    $('request-error').hidden = true;
  }

  // ---- wiring ------------------------------------------------------------
  $('reset-form').addEventListener('submit', reset);
  $('step-form').addEventListener('submit', step);
  $('state-button').addEventListener('click', () => {
    clearRequestError();
    refreshState();
  });
  $('db-select').addEventListener('change', fillQuestions);
  for (const b of document.querySelectorAll('.action-type')) b.addEventListener('click', () => selectAction(b.dataset.action));
  $('argument').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey) && !$('step-button').disabled) step(e);
  });
  selectAction('DESCRIBE');
  loadCatalog();
  connect().catch((e) => showRequestError(e.message));
})();
