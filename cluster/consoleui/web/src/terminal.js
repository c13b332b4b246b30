// The serial console: xterm.js over the console websocket
// (subprotocol plain.kubevirt.io, raw bytes both ways).

import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { websocketURL } from './api.js';
import { subPath } from './kubevirt.js';
import { Follower } from './stream.js';

export class SerialConsole {
  constructor(el, statusEl) {
    this.term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000, convertEol: false });
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    this.term.open(el);
    this.ws = null;
    const enc = new TextEncoder();
    this.term.onData((d) => {
      if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(enc.encode(d));
    });
    new ResizeObserver(() => this.refit()).observe(el);
    this.follower = new Follower({
      say: (s) => { statusEl.textContent = `serial console: ${s}`; },
      open: (ns, name, cb) => this.open(ns, name, cb),
    });
  }

  refit() {
    if (this.term.element?.offsetParent) this.fit.fit();
  }

  open(ns, name, { connected, ended }) {
    const ws = new WebSocket(websocketURL(subPath(ns, 'virtualmachineinstances', name, 'console')), ['plain.kubevirt.io']);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    ws.onopen = () => {
      connected();
      this.refit();
    };
    ws.onmessage = (e) => this.term.write(typeof e.data === 'string' ? e.data : new Uint8Array(e.data));
    ws.onclose = (e) => ended(e.reason || `code ${e.code}`);
    return {
      close: () => {
        ws.onclose = null;
        ws.close();
        if (this.ws === ws) this.ws = null;
      },
    };
  }

  follow(ns, name) {
    this.term.reset();
    this.follower.follow(ns, name);
  }

  update(vmi) {
    this.follower.update(vmi);
  }

  setActive(on, vmi) {
    this.follower.setActive(on, vmi);
    if (on) {
      this.refit();
      this.term.focus();
    }
  }
}
