// Offline API explorer: reads /openapi.json and lets you call each operation. No external requests.
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const apiKey = new URLSearchParams(location.search).get('api_key');
  const keyQuery = apiKey ? '?api_key=' + encodeURIComponent(apiKey) : '';
  if (apiKey) $('token').value = apiKey;
  $('spec-link').href = '/openapi.json' + keyQuery;
  $('web-link').href = '/web' + keyQuery;

  const examples = {
    '/reset': { seed: 0 },
    '/step': { action: { action_type: 'DESCRIBE', argument: 'table_name' } },
    '/close': {},
  };

  function headers(json) {
    const h = {};
    if (json) h['content-type'] = 'application/json';
    const token = $('token').value.trim();
    if (token) h.authorization = 'Bearer ' + token;
    const session = $('session').value.trim();
    if (session) h['x-session-id'] = session;
    return h;
  }

  function el(tag, props, children) {
    const e = document.createElement(tag);
    Object.assign(e, props || {});
    for (const c of children || []) e.append(c);
    return e;
  }

  async function send(method, path, textarea, out) {
    out.replaceChildren(el('span', { className: 'muted', textContent: 'sending…' }));
    const init = { method, headers: headers(method === 'POST') };
    if (method === 'POST') init.body = textarea.value.trim() === '' ? undefined : textarea.value;
    try {
      const res = await fetch(path, init);
      const text = await res.text();
      let shown = text;
      try {
        const parsed = JSON.parse(text);
        shown = JSON.stringify(parsed, null, 2);
        if (path === '/reset' && parsed.session_id) $('session').value = parsed.session_id;
      } catch (_) { /* not JSON (metrics) */ }
      out.replaceChildren(
        el('div', { className: res.ok ? 'status-ok' : 'status-bad', textContent: res.status + ' ' + res.statusText }),
        el('pre', { textContent: shown }),
      );
    } catch (e) {
      out.replaceChildren(el('div', { className: 'status-bad', textContent: String(e) }));
    }
  }

  function renderOperation(path, method, op) {
    const body = el('div', { className: 'body' });
    if (op.description) body.append(el('p', { className: 'muted', textContent: op.description }));
    let textarea = null;
    if (path === '/ws') {
      body.append(el('p', { textContent: 'WebSocket endpoint: use the /web page, the TypeScript client or an OpenEnv client.' }));
    } else {
      if (method === 'post') {
        textarea = el('textarea', { rows: 5, value: JSON.stringify(examples[path] || {}, null, 2) });
        body.append(el('div', { className: 'muted', textContent: 'Request body (JSON)' }), textarea);
      }
      const out = el('div');
      const button = el('button', { type: 'button', textContent: 'Send ' + method.toUpperCase() + ' ' + path });
      button.addEventListener('click', () => send(method.toUpperCase(), path, textarea, out));
      body.append(button, out);
    }
    const responses = Object.entries(op.responses || {}).map(([code, r]) => code + ' ' + (r.description || '')).join(' · ');
    body.append(el('p', { className: 'muted', textContent: 'Responses: ' + responses }));
    return el('details', { className: 'op' }, [
      el('summary', {}, [
        el('span', { className: 'method ' + method, textContent: method.toUpperCase() }),
        el('span', { className: 'path', textContent: path }),
        el('span', { className: 'muted', textContent: op.summary || '' }),
      ]),
      body,
    ]);
  }

  async function main() {
    const res = await fetch('/openapi.json' + keyQuery, { headers: headers(false) });
    if (!res.ok) {
      $('operations').textContent = 'Could not load /openapi.json: HTTP ' + res.status + (res.status === 401 ? ' (add ?api_key=... to the page URL)' : '');
      return;
    }
    const spec = await res.json();
    $('title').textContent = spec.info.title + ' ' + spec.info.version;
    $('description').textContent = spec.info.description;
    for (const [path, item] of Object.entries(spec.paths)) {
      for (const [method, op] of Object.entries(item)) $('operations').append(renderOperation(path, method, op));
    }
    for (const [name, schema] of Object.entries(spec.components.schemas)) {
      $('schemas').append(el('details', { className: 'op' }, [
        el('summary', {}, [el('span', { className: 'path', textContent: name })]),
        el('div', { className: 'body' }, [el('pre', { textContent: JSON.stringify(schema, null, 2) })]),
      ]));
    }
  }
  main().catch((e) => { $('operations').textContent = String(e); });
})();
