// Requests to the Kubernetes API through the console server's proxy
// (/k8s/...), which adds the user's credentials.

const prefix = '/k8s';

/** An answer of the API server that is not 2xx, with its Status. */
export class APIError extends Error {
  constructor(code, reason, message) {
    super(message);
    this.code = code;
    this.reason = reason;
  }
}

async function errorOf(res) {
  const text = await res.text();
  let status = null;
  try {
    status = JSON.parse(text);
  } catch {
    // not a Status: keep the text
  }
  return new APIError(res.status, status?.reason || res.statusText, status?.message || text || res.statusText);
}

/** request sends method path (an API server path) and returns the JSON answer. */
export async function request(method, path, body, signal) {
  const init = { method, signal, headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(prefix + path, init);
  if (!res.ok) throw await errorOf(res);
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

/** explain turns an error of "verb what" into a sentence for the user. */
export function explain(err, verb, what) {
  if (err instanceof APIError) {
    switch (err.code) {
      case 401:
        return `Your credentials were refused while trying to ${verb} ${what}: ${err.message}`;
      case 403:
        return `You may not ${verb} ${what}: ${err.message}`;
      case 404:
        return `Cannot ${verb} ${what}: not found (${err.message})`;
      case 409:
        return `Cannot ${verb} ${what} now: ${err.message}`;
    }
    return `Failed to ${verb} ${what} (${err.code} ${err.reason}): ${err.message}`;
  }
  return `Failed to ${verb} ${what}: ${err.message || err}`;
}

/**
 * mayI asks the API server whether the user may do verb on resource
 * (SelfSubjectAccessReview: every authenticated user may ask), so the page
 * does not send requests it knows will be refused.
 */
export async function mayI(attrs) {
  const review = await request('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SelfSubjectAccessReview',
    spec: { resourceAttributes: attrs },
  });
  return { allowed: !!review.status?.allowed, reason: review.status?.reason || '' };
}

/** websocketURL is the ws:// URL of an API server path through the proxy. */
export function websocketURL(path) {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${location.host}${prefix}${path}`;
}

export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

class Gone extends Error {}

/**
 * watch lists path and then watches it, calling onSync(items) after each
 * (re)list and onEvent(event) for each change, until signal aborts. A
 * watch that ends is resumed from the last resourceVersion; an expired
 * one (410) relists. onError gets errors; a 401/403 stops the loop.
 */
export async function watch(path, { onSync, onEvent, onError, signal }) {
  while (!signal.aborted) {
    try {
      const list = await request('GET', path, undefined, signal);
      onSync(list.items || []);
      let rv = list.metadata.resourceVersion;
      for (;;) {
        rv = await watchFrom(path, rv, onEvent, signal);
        if (signal.aborted) return;
      }
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof Gone) continue;
      onError(err);
      if (err instanceof APIError && (err.code === 401 || err.code === 403)) return;
      await sleep(3000, signal);
    }
  }
}

async function watchFrom(path, rv, onEvent, signal) {
  const sep = path.includes('?') ? '&' : '?';
  const res = await fetch(`${prefix}${path}${sep}watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(rv)}`, { signal });
  if (!res.ok) throw await errorOf(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return rv;
    buf += value;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const ev = JSON.parse(line);
      if (ev.type === 'ERROR') {
        if (ev.object?.code === 410) throw new Gone();
        throw new APIError(ev.object?.code || 500, ev.object?.reason || 'Error', ev.object?.message || 'watch error');
      }
      rv = ev.object?.metadata?.resourceVersion || rv;
      if (ev.type !== 'BOOKMARK') onEvent(ev);
    }
  }
}
