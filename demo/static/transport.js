// How the browser client reaches the services: JSON POSTs through the page's own origin,
// counted for the traffic panel, and the interval each poll's answer sets (never cached).
// Methods of MlutpClient (client.js), kept here by job.

// the line a gzipped request's headers gain: gzip pays only when it saves more than this
const CONTENT_ENCODING_LINE = "Content-Encoding: gzip\r\n".length;

// the body to send and its headers: gzipped (CompressionStream, in every current browser and
// in Node) when it is at least `minBytes` long and smaller so, its header line counted
// (docs/protocol.md: Request bodies); else the JSON text as it is
export async function encodeBody(text, minBytes) {
  const plain = new TextEncoder().encode(text);
  if (minBytes == null || plain.length < minBytes || typeof CompressionStream === "undefined") {
    return { body: text, bytes: plain.length, headers: {} };
  }
  const stream = new Blob([plain]).stream().pipeThrough(new CompressionStream("gzip"));
  const packed = new Uint8Array(await new Response(stream).arrayBuffer());
  if (packed.length + CONTENT_ENCODING_LINE >= plain.length) {
    return { body: text, bytes: plain.length, headers: {} };
  }
  return { body: packed, bytes: packed.length, headers: { "Content-Encoding": "gzip" } };
}

// the error of a digest the server does not keep the body of: the full body goes at once
const UNKNOWN_DIGEST = "unknown_request_digest";

// the digest of a full body (docs/protocol.md: The digest request): the first 16 bytes of
// SHA-256 of its JSON bytes (before any gzip), base64url without padding; null where
// crypto.subtle is missing (a page over plain HTTP from another host): the body goes in full
export async function requestDigest(text) {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return null;
  const hash = await subtle.digest("SHA-256", new TextEncoder().encode(text));
  let binary = "";
  for (const byte of new Uint8Array(hash, 0, 16)) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export const transport = {
  pause(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  },

  // a JSON POST through the page's own origin (or `baseUrl`); counted for the traffic panel.
  // With `revalidate`, the last answer's answer_tag goes in the body, and a 204 No Content is
  // that answer: the client keeps what it has. With `digest` (orders/state), a body the same
  // as the last one sent there, answered, goes as its digest alone; one the server does not
  // keep (a restart, another replica) is sent again in full at once, no error
  async call(url, body, signal, { revalidate = false, digest = false } = {}) {
    const held = revalidate ? this.validated.get(url) : undefined;
    const text = JSON.stringify(held ? { ...body, answer_tag: held[0] } : body);
    let sent = null;
    if (digest && this.options.requestDigests) {
      const last = this.sentFull.get(url);
      if (last && last.text === text) {
        this.traffic.digests += 1;
        sent = await this.send(url, JSON.stringify({ request_digest: last.digest }), signal);
        if (sent.status === 400 && sent.answer?.code === UNKNOWN_DIGEST) {
          this.traffic.digestMisses += 1;
          sent = null;
        }
      }
      if (sent === null) {
        // this body is now the one sent last: a digest stands for it once it is answered
        this.sentFull.delete(url);
        sent = await this.send(url, text, signal);
        if (sent.status === 200 || sent.status === 204) {
          const bodyDigest = await requestDigest(text);
          if (bodyDigest) this.sentFull.set(url, { text, digest: bodyDigest });
        }
      }
    } else {
      sent = await this.send(url, text, signal);
    }
    const { status, answer, headers } = sent;
    if (status === 204 && held) {
      return { status: 200, answer: held[1], headers };
    }
    const tag = answer?.answer_tag;
    if (revalidate && status === 200 && typeof tag === "string") {
      this.validated.set(url, [tag, answer]);
    }
    return { status, answer, headers };
  },

  // one POST of this JSON text (gzipped where that pays), counted: its status, its JSON
  // (null when none) and its headers
  async send(url, text, signal) {
    const sent = await encodeBody(text, this.options.gzipMinBytes);
    this.traffic.requests += 1;
    this.traffic.bytesSent += sent.bytes;
    const headers = { "Content-Type": "application/json", ...sent.headers, ...this.headers };
    const response = await this.fetch(this.baseUrl + url, {
      method: "POST", headers, body: sent.body, signal,
    });
    const payload = await response.text();
    this.traffic.bytesReceived += new TextEncoder().encode(payload).length;
    let answer = null;
    try {
      answer = payload ? JSON.parse(payload) : null;
    } catch {
      answer = null;
    }
    return { status: response.status, answer, headers: response.headers };
  },

  // a protocol request: its answer, or null (stale UI, backoff) on any failure
  async post(url, body, { poll = false, signal } = {}) {
    let result;
    try {
      if (poll) this.traffic.polls += 1;
      // orders/state is revalidated by its answer_tag (launch always answers in full), and
      // repeated as a digest
      const state = url.endsWith("/orders/state");
      result = await this.call(url, body, signal, { revalidate: state, digest: state });
    } catch (error) {
      if (error.name === "AbortError") throw error;
      if (poll) this.intervalMs = this.options.fallbackIntervalMs;
      return null;
    }
    const { status, answer, headers } = result;
    if (poll) {
      this.lastAnswer = { waited: headers.get("X-Mlutp-Wait"), at: Date.now() };
      if (status === 503 && headers.has("Retry-After")) {
        // the server sheds load: come back when it says, in whole seconds, plus a random part
        // of a second, so the clients shed in one instant do not all come back in another
        const retryAfterMs = Number(headers.get("Retry-After")) * 1000;
        this.intervalMs = retryAfterMs ? retryAfterMs + Math.random() * 1000 : this.options.fallbackIntervalMs;
        this.lastAnswer.waited = null;
      } else if (headers.has("X-Yataxi-Polling-Interval-Ms")) {
        this.intervalMs = Number(headers.get("X-Yataxi-Polling-Interval-Ms"));
      } else {
        this.intervalMs = this.options.fallbackIntervalMs; // not cached: the fallback
      }
      this.lastAnswer.intervalMs = this.intervalMs;
    }
    return status === 200 ? answer : null;
  },
};
