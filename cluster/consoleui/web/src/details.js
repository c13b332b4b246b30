// The selected VM's details: conditions, guest-agent data (when the agent
// is connected) and recent events of the VM and its VMI.

import { explain, mayI, request } from './api.js';
import { age, bytes, h } from './dom.js';
import { isTrue, running, subPath } from './kubevirt.js';

export class Details {
  constructor(el) {
    this.el = el;
    this.target = null;
    this.timer = null;
    this.agent = null; // {os, users, fs} or {error}
    this.events = null; // [] or {error}
    this.vmi = null;
    this.mayEvents = null;
    this.active = false;
  }

  /** agentUp says whether the guest agent can answer now. */
  agentUp() {
    return running(this.vmi) && isTrue(this.vmi, 'AgentConnected') && !isTrue(this.vmi, 'Paused');
  }

  /**
   * setActive starts (true) or stops the refreshes: the guest agent and
   * events are read only while the details are shown.
   */
  setActive(on) {
    this.active = on;
    clearInterval(this.timer);
    this.timer = null;
    if (!on || !this.target) return;
    this.refreshEvents();
    this.refreshAgent();
    this.timer = setInterval(() => { this.refreshEvents(); this.refreshAgent(); }, 10000);
  }

  follow(ns, name) {
    clearInterval(this.timer);
    this.target = name ? { ns, name } : null;
    this.agent = null;
    this.events = null;
    this.vmi = null;
    this.agentUID = null;
    this.render();
    this.setActive(this.active);
  }

  update(vmi) {
    this.vmi = vmi;
    const connected = isTrue(vmi, 'AgentConnected');
    if (!connected) {
      this.agent = null;
      this.agentUID = null;
    } else if (this.active && this.agentUp() && this.agentUID !== vmi.metadata.uid) {
      this.agentUID = vmi.metadata.uid;
      this.refreshAgent();
    }
    this.render();
  }

  async refreshAgent() {
    const t = this.target;
    if (!t || !this.active || !this.agentUp()) return;
    this.agentUID = this.vmi.metadata.uid;
    const get = (what) => request('GET', subPath(t.ns, 'virtualmachineinstances', t.name, what));
    try {
      const [os, users, fs] = await Promise.all([get('guestosinfo'), get('userlist'), get('filesystemlist')]);
      if (t === this.target) this.agent = { os, users: users?.items || [], fs: fs?.items || [] };
    } catch (err) {
      if (t === this.target) this.agent = { error: explain(err, 'read the guest agent of', `VM ${t.name}`) };
    }
    this.render();
  }

  async refreshEvents() {
    const t = this.target;
    if (!t || !this.active) return;
    try {
      if (this.mayEvents?.ns !== t.ns) {
        const r = await mayI({ namespace: t.ns, verb: 'list', resource: 'events' });
        this.mayEvents = { ns: t.ns, ...r };
      }
      if (!this.mayEvents.allowed) {
        this.events = { error: `You may not list events in namespace ${t.ns}.` };
      } else {
        const sel = encodeURIComponent(`involvedObject.name=${t.name}`);
        const list = await request('GET', `/api/v1/namespaces/${encodeURIComponent(t.ns)}/events?fieldSelector=${sel}`);
        const when = (e) => e.lastTimestamp || e.eventTime || e.metadata.creationTimestamp;
        const items = (list.items || [])
          .filter((e) => ['VirtualMachine', 'VirtualMachineInstance'].includes(e.involvedObject?.kind))
          .sort((a, b) => Date.parse(when(b)) - Date.parse(when(a)))
          .slice(0, 20);
        this.events = items.map((e) => ({ ...e, when: when(e) }));
      }
    } catch (err) {
      this.events = { error: explain(err, 'list events in', `namespace ${t.ns}`) };
    }
    if (t === this.target) this.render();
  }

  render() {
    const parts = [];
    if (!this.target) {
      this.el.replaceChildren();
      return;
    }
    const conds = this.vmi?.status?.conditions || [];
    parts.push(h('h3', {}, 'Conditions'));
    parts.push(conds.length
      ? table(['type', 'status', 'reason', 'message'], conds.map((c) => [c.type, c.status, c.reason || '', c.message || '']))
      : h('p', { class: 'muted' }, this.vmi ? 'none' : 'no VM instance (the VM is not running)'));

    parts.push(h('h3', {}, 'Guest agent'));
    if (!this.agent) {
      parts.push(h('p', { class: 'muted' }, 'not connected'));
    } else if (this.agent.error) {
      parts.push(h('p', { class: 'error' }, this.agent.error));
    } else {
      const os = this.agent.os || {};
      parts.push(h('dl', { class: 'agent', 'data-testid': 'guest-os' },
        h('dt', {}, 'OS'), h('dd', {}, os.os?.prettyName || os.os?.name || os.os?.id || '?'),
        h('dt', {}, 'kernel'), h('dd', {}, os.os?.kernelRelease || ''),
        h('dt', {}, 'hostname'), h('dd', {}, os.hostname || ''),
        h('dt', {}, 'agent'), h('dd', {}, os.guestAgentVersion || ''),
        h('dt', {}, 'users'), h('dd', {}, this.agent.users.map((u) => u.userName).join(', ') || 'none logged in')));
      parts.push(this.agent.fs.length
        ? table(['mount', 'type', 'used', 'size'], this.agent.fs.map((f) => [f.mountPoint, f.fileSystemType, bytes(f.usedBytes), bytes(f.totalBytes)]))
        : h('p', { class: 'muted' }, 'no file systems reported'));
    }

    parts.push(h('h3', {}, 'Recent events'));
    if (!this.events) parts.push(h('p', { class: 'muted' }, 'loading…'));
    else if (this.events.error) parts.push(h('p', { class: 'error' }, this.events.error));
    else if (!this.events.length) parts.push(h('p', { class: 'muted' }, 'none'));
    else {
      parts.push(table(['age', 'object', 'type', 'reason', 'message'], this.events.map((e) =>
        [age(e.when), e.involvedObject.kind === 'VirtualMachine' ? 'VM' : 'VMI', e.type, e.reason, e.message])));
    }
    this.el.replaceChildren(...parts);
  }
}

function table(head, rows) {
  return h('table', { class: 'small' },
    h('thead', {}, h('tr', {}, head.map((c) => h('th', {}, c)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c))))));
}
