// A connection to one VMI's stream (serial console or VNC) that follows
// the VMI: it opens when the VMI runs, closes when it stops, and reopens
// after a restart (a new VMI uid) or a dropped connection.

import { running } from './kubevirt.js';

export class Follower {
  /**
   * open(ns, name) starts a connection and returns a handle with close();
   * the connection calls the ended() it is given when it drops.
   * say(text) shows the state to the user.
   */
  constructor({ open, say }) {
    this.openConn = open;
    this.say = say;
    this.target = null; // {ns, name}
    this.uid = null;
    this.conn = null;
    this.retry = null;
    this.delay = 1000;
    this.active = true;
  }

  /** follow starts following ns/name (null: nothing). */
  follow(ns, name) {
    this.stop();
    this.target = name ? { ns, name } : null;
    if (!name) this.say('no VM selected');
  }

  /** setActive pauses (false) or resumes the connection, e.g. for a hidden tab. */
  setActive(on, vmi) {
    this.active = on;
    if (!on) this.stop(true);
    else this.update(vmi);
  }

  /** update takes the VMI's latest state from the watch. */
  update(vmi) {
    if (!this.target || !this.active) return;
    if (!running(vmi)) {
      if (this.conn || this.retry) this.stop(true);
      this.say(vmi ? `VM is ${vmi.status?.phase || 'starting'}: waiting for it to run` : 'VM is not running');
      this.uid = null;
      return;
    }
    if (vmi.metadata.uid !== this.uid) {
      this.stop(true);
      this.uid = vmi.metadata.uid;
      this.delay = 1000;
      this.connect();
    }
  }

  connect() {
    const { ns, name } = this.target;
    this.say('connecting…');
    let ended = false;
    const conn = this.openConn(ns, name, {
      connected: () => { this.delay = 1000; this.say('connected'); },
      ended: (why) => {
        if (ended || this.conn !== conn) return;
        ended = true;
        this.conn = null;
        this.say(`disconnected (${why}); reconnecting in ${this.delay / 1000} s`);
        this.retry = setTimeout(() => { this.retry = null; if (this.uid) this.connect(); }, this.delay);
        this.delay = Math.min(this.delay * 2, 15000);
      },
    });
    this.conn = conn;
  }

  stop(keepTarget) {
    clearTimeout(this.retry);
    this.retry = null;
    const c = this.conn;
    this.conn = null;
    c?.close();
    this.uid = null;
    if (!keepTarget) this.target = null;
  }
}
