// nodevirt console: the page. State is the namespace's VMs and VMIs (kept
// by watches) and the selected VM; the location hash (#ns=…&vm=…) holds
// the choice so a reload keeps it.

import '@xterm/xterm/css/xterm.css';
import './style.css';
import { explain, mayI, request, watch } from './api.js';
import { $, h } from './dom.js';
import { Details } from './details.js';
import { actions, condition, ip, status, subPath, vmisPath, vmsPath } from './kubevirt.js';
import { SerialConsole } from './terminal.js';
import { Screen } from './vnc.js';

const state = { ns: '', vms: new Map(), vmis: new Map(), selected: '', abort: null, tab: 'console', listError: '' };
let serial, screen, details;

function say(text, kind = 'info') {
  const el = $('#message');
  el.textContent = text;
  el.className = text ? kind : '';
}

function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  return { ns: p.get('ns') || '', vm: p.get('vm') || '' };
}

function writeHash() {
  const p = new URLSearchParams();
  p.set('ns', state.ns);
  if (state.selected) p.set('vm', state.selected);
  history.replaceState(null, '', `#${p}`);
}

async function openNamespace(ns) {
  state.abort?.abort();
  state.ns = ns;
  state.vms.clear();
  state.vmis.clear();
  state.listError = '';
  $('#namespace').value = ns;
  select(readHash().ns === ns ? readHash().vm : '');
  writeHash();
  say('');
  renderList();
  const abort = new AbortController();
  state.abort = abort;
  $('#list-state').textContent = 'loading…';
  let may;
  try {
    may = await mayI({ namespace: ns, verb: 'list', group: 'kubevirt.io', resource: 'virtualmachines' });
  } catch (err) {
    if (!abort.signal.aborted) showListError(explain(err, 'check your rights in', `namespace ${ns}`));
    return;
  }
  if (abort.signal.aborted) return;
  if (!may.allowed) {
    showListError(`You may not list virtual machines in namespace ${ns}.${may.reason ? ` (${may.reason})` : ''}`);
    return;
  }
  const follow = (map, path, what) => watch(path, {
    signal: abort.signal,
    onSync: (items) => {
      state.listError = '';
      map.clear();
      for (const o of items) map.set(o.metadata.name, o);
      $('#list-state').textContent = '';
      changed();
    },
    onEvent: (ev) => {
      if (ev.type === 'DELETED') map.delete(ev.object.metadata.name);
      else map.set(ev.object.metadata.name, ev.object);
      changed();
    },
    onError: (err) => showListError(explain(err, `watch ${what} in`, `namespace ${ns}`)),
  });
  follow(state.vms, vmsPath(ns), 'virtual machines');
  follow(state.vmis, vmisPath(ns), 'virtual machine instances');
}

function showListError(text) {
  $('#list-state').textContent = '';
  state.listError = text;
  renderList();
}

function changed() {
  renderList();
  renderSelected();
}

function renderList() {
  const names = [...new Set([...state.vms.keys()])].sort();
  const rows = names.map((name) => {
    const vm = state.vms.get(name);
    const vmi = state.vmis.get(name);
    const st = status(vm, vmi);
    const conds = (vmi?.status?.conditions || vm?.status?.conditions || [])
      .filter((c) => c.status === 'True' || (c.type === 'Ready' && c.status === 'False'))
      .map((c) => h('span', { class: `badge ${c.status === 'True' ? 'on' : 'off'}`, title: c.message || c.reason || '' },
        c.status === 'True' ? c.type : `not ${c.type}`));
    return h('tr', { 'data-vm': name, class: name === state.selected ? 'selected' : '', onclick: () => select(name), tabindex: 0,
      onkeydown: (e) => { if (e.key === 'Enter') select(name); } },
    h('td', { class: 'name' }, name),
    h('td', { class: `phase phase-${st}`, 'data-testid': 'phase' }, st),
    h('td', { class: 'node' }, vmi?.status?.nodeName || ''),
    h('td', { class: 'ip' }, ip(vmi)),
    h('td', { class: 'conds' }, conds));
  });
  if (state.listError) {
    rows.unshift(h('tr', {}, h('td', { colspan: 5, class: 'error', 'data-testid': 'list-error' }, state.listError)));
  } else if (!rows.length && !$('#list-state').textContent) {
    rows.push(h('tr', {}, h('td', { colspan: 5, class: 'muted' }, `no virtual machines in namespace ${state.ns}`)));
  }
  $('#vms tbody').replaceChildren(...rows);
}

function select(name) {
  if (name === state.selected && serial.follower.target) return;
  state.selected = name;
  writeHash();
  $('#detail').hidden = !name;
  $('#vm-name').textContent = name;
  serial.follow(state.ns, name);
  screen.follow(state.ns, name);
  details.follow(state.ns, name);
  renderList();
  renderSelected();
  showTab(state.tab);
}

function renderSelected() {
  const name = state.selected;
  if (!name) return;
  const vm = state.vms.get(name);
  const vmi = state.vmis.get(name);
  $('#vm-status').textContent = status(vm, vmi);
  const buttons = actions(vm, vmi).map((a) => h('button', {
    'data-action': a.name, disabled: !a.enabled || undefined, onclick: () => act(a, name),
  }, a.name));
  $('#actions').replaceChildren(...buttons);
  const failure = condition(vm, 'Failure');
  if (failure?.status === 'True') say(`VM ${name}: ${failure.message}`, 'error');
  serial.update(vmi);
  screen.update(vmi);
  details.update(vmi);
}

async function act(a, name) {
  const ns = state.ns;
  say(`${a.name} ${name}…`);
  try {
    await request('PUT', subPath(ns, a.kind, name, a.name), {});
    say(`${a.name} ${name}: accepted`, 'ok');
  } catch (err) {
    say(explain(err, a.name, `VM ${name} in namespace ${ns}`), 'error');
  }
}

function showTab(tab) {
  state.tab = tab;
  for (const b of document.querySelectorAll('[data-tab]')) b.setAttribute('aria-selected', String(b.dataset.tab === tab));
  for (const p of document.querySelectorAll('[data-panel]')) p.hidden = p.dataset.panel !== tab;
  const vmi = state.vmis.get(state.selected);
  serial.setActive(tab === 'console', vmi);
  screen.setActive(tab === 'vnc', vmi);
  details.setActive(tab === 'details');
}

async function fillNamespaces() {
  try {
    const may = await mayI({ verb: 'list', resource: 'namespaces' });
    if (!may.allowed) return;
    const list = await request('GET', '/api/v1/namespaces');
    $('#namespaces').replaceChildren(...list.items.map((n) => h('option', { value: n.metadata.name })));
  } catch {
    // the picker stays a free text field
  }
}

async function main() {
  serial = new SerialConsole($('#terminal'), $('#console-state'));
  screen = new Screen($('#screen'), $('#vnc-state'));
  details = new Details($('#details'));
  for (const b of document.querySelectorAll('[data-tab]')) b.addEventListener('click', () => showTab(b.dataset.tab));
  $('#ns-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const ns = $('#namespace').value.trim();
    if (ns && ns !== state.ns) openNamespace(ns);
  });
  let info;
  try {
    const res = await fetch('/info');
    info = await res.json();
  } catch (err) {
    say(`cannot reach the console server: ${err.message}`, 'error');
    return;
  }
  $('#context').textContent = `${info.context} · ${info.server}`;
  fillNamespaces();
  await openNamespace(readHash().ns || info.namespace);
}

main();
