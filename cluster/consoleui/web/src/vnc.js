// The VNC screen: noVNC's RFB client over the vnc websocket
// (subprotocol plain.kubevirt.io).

import RFB from '@novnc/novnc';
import { websocketURL } from './api.js';
import { hasGraphics, subPath } from './kubevirt.js';
import { Follower } from './stream.js';

export class Screen {
  constructor(el, statusEl) {
    this.el = el;
    this.say = (s) => { statusEl.textContent = `VNC: ${s}`; };
    this.follower = new Follower({ say: this.say, open: (ns, name, cb) => this.open(ns, name, cb) });
  }

  open(ns, name, { connected, ended }) {
    const rfb = new RFB(this.el, websocketURL(subPath(ns, 'virtualmachineinstances', name, 'vnc')), {
      wsProtocols: ['plain.kubevirt.io'],
    });
    rfb.scaleViewport = true;
    rfb.resizeSession = false;
    rfb.focusOnClick = true;
    rfb.background = '#111';
    rfb.addEventListener('connect', () => connected());
    rfb.addEventListener('disconnect', (e) => ended(e.detail?.clean ? 'closed' : 'connection lost'));
    let closed = false;
    return {
      close: () => {
        if (closed) return;
        closed = true;
        try {
          rfb.disconnect();
        } catch {
          // already disconnected
        }
      },
    };
  }

  follow(ns, name) {
    this.follower.follow(ns, name);
  }

  update(vmi) {
    if (vmi && !hasGraphics(vmi)) {
      this.follower.stop(true);
      this.say('this VM has no graphics device (spec.domain.devices.autoattachGraphicsDevice: false)');
      return;
    }
    this.follower.update(vmi);
  }

  setActive(on, vmi) {
    if (on && vmi && !hasGraphics(vmi)) {
      this.follower.active = true;
      this.update(vmi);
      return;
    }
    this.follower.setActive(on, vmi);
  }
}
