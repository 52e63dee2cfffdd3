// The JS half of the host globals. It runs once per VM, before the bundle,
// and receives `host`: Go functions that never become reachable from
// handler code. Built-ins it relies on are captured here, so that a handler
// replacing (say) Promise.prototype.then cannot reach the host boundary.
(function (host) {
  'use strict';
  const g = globalThis;
  const { apply, defineProperty, getOwnPropertyDescriptor, ownKeys } = Reflect;
  const P = Promise;
  const then = P.prototype.then;
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const RangeErrorCtor = RangeError;
  const MapCtor = Map;
  const U8 = Uint8Array;
  const AB = ArrayBuffer;
  const isView = ArrayBuffer.isView;
  const isArray = Array.isArray;
  const keys = Object.keys;
  const objectToString = Object.prototype.toString;
  const toLower = String.prototype.toLowerCase;
  const toUpper = String.prototype.toUpperCase;
  const trim = String.prototype.trim;
  const test = RegExp.prototype.test;
  const push = Array.prototype.push;
  const join = Array.prototype.join;
  const sort = Array.prototype.sort;

  function define(obj, name, value) {
    defineProperty(obj, name, { value, writable: true, enumerable: false, configurable: true });
  }

  function safeString(v) {
    if (typeof v === 'string') return v;
    try {
      const j = stringify(v);
      if (typeof j === 'string') return j;
    } catch (e) { /* fall through */ }
    try {
      return String(v);
    } catch (e) {
      return apply(objectToString, v, []);
    }
  }

  // describeError turns any thrown value into [name, message, stack].
  function describeError(e) {
    if (e === null || (typeof e !== 'object' && typeof e !== 'function')) {
      return ['', safeString(e), ''];
    }
    let name = '', message = '', stack = '';
    try { const n = e.name; if (typeof n === 'string') name = n; } catch (x) { /* ignore */ }
    try {
      const m = e.message;
      if (typeof m === 'string') message = m;
      else if (m !== undefined) message = safeString(m);
    } catch (x) { /* ignore */ }
    try { const s = e.stack; if (typeof s === 'string') stack = s; } catch (x) { /* ignore */ }
    if (name === '' && message === '') message = safeString(e);
    return [name, message, stack];
  }

  // ---- console -----------------------------------------------------------

  function format1(v) {
    switch (typeof v) {
      case 'string': return v;
      case 'function': return '[Function: ' + (v.name || 'anonymous') + ']';
      case 'bigint': return String(v) + 'n';
      case 'object':
        if (v === null) return 'null';
        if (v instanceof ErrorCtor) {
          const s = v.stack;
          return typeof s === 'string' ? s : String(v);
        }
        try {
          const j = stringify(v);
          if (typeof j === 'string') return j;
        } catch (e) {
          return apply(objectToString, v, []) + ' (not serializable: ' + describeError(e)[1] + ')';
        }
        return apply(objectToString, v, []);
      default: return String(v);
    }
  }

  function emit(level, args) {
    if (host.logFull()) return;
    const parts = [];
    for (let i = 0; i < args.length; i++) parts[i] = format1(args[i]);
    host.log(level, apply(join, parts, [' ']));
  }

  const console = {
    log(...args) { emit('log', args); },
    info(...args) { emit('info', args); },
    warn(...args) { emit('warn', args); },
    error(...args) { emit('error', args); },
    debug(...args) { emit('debug', args); },
  };
  define(g, 'console', console);

  // ---- microtasks and timers --------------------------------------------

  function queueMicrotask(callback) {
    if (typeof callback !== 'function') {
      throw new TypeErrorCtor('queueMicrotask: the callback must be a function');
    }
    apply(then, new P((resolve) => resolve()), [() => {
      try {
        callback();
      } catch (e) {
        host.uncaught(e, 'a queueMicrotask callback');
      }
    }]);
  }
  define(g, 'queueMicrotask', queueMicrotask);
  define(g, 'setTimeout', host.setTimeout);
  define(g, 'clearTimeout', host.clearTimeout);

  // ---- encoding ---------------------------------------------------------

  function bytesOf(input, what) {
    if (input instanceof AB) return new U8(input);
    if (isView(input)) return new U8(input.buffer, input.byteOffset, input.byteLength);
    throw new TypeErrorCtor(what + ': expected an ArrayBuffer, a typed array or a DataView');
  }

  class TextEncoder {
    get encoding() { return 'utf-8'; }
    encode(input = '') { return new U8(host.utf8Encode(String(input))); }
  }

  const utf8Labels = ['utf-8', 'utf8', 'unicode-1-1-utf-8', 'unicode11utf8', 'unicode20utf8', 'x-unicode20utf8'];
  class TextDecoder {
    #fatal;
    #ignoreBOM;
    constructor(label = 'utf-8', options = undefined) {
      const l = apply(toLower, apply(trim, String(label), []), []);
      if (utf8Labels.indexOf(l) < 0) {
        throw new RangeErrorCtor('TextDecoder: only utf-8 is supported, not "' + label + '"');
      }
      this.#fatal = !!(options && options.fatal);
      this.#ignoreBOM = !!(options && options.ignoreBOM);
    }
    get encoding() { return 'utf-8'; }
    get fatal() { return this.#fatal; }
    get ignoreBOM() { return this.#ignoreBOM; }
    decode(input = undefined) {
      if (input === undefined) return '';
      return host.utf8Decode(bytesOf(input, 'TextDecoder.decode'), this.#fatal, this.#ignoreBOM);
    }
  }
  define(g, 'TextEncoder', TextEncoder);
  define(g, 'TextDecoder', TextDecoder);
  define(g, 'atob', host.atob);
  define(g, 'btoa', host.btoa);

  const crypto = {};
  define(crypto, 'randomUUID', host.randomUUID);
  define(crypto, 'getRandomValues', host.getRandomValues);
  define(g, 'crypto', crypto);

  // ---- URL (goja_nodejs's parser behind a class that hides its Go object)

  const InnerURL = host.URL;
  const specialSchemes = ['http:', 'https:', 'ws:', 'wss:', 'ftp:'];
  const USP = host.URLSearchParams;
  class URL {
    #u;
    constructor(url, base = undefined) {
      this.#u = base === undefined ? new InnerURL(String(url)) : new InnerURL(String(url), String(base));
    }
    static canParse(url, base = undefined) {
      try {
        new URL(url, base);
        return true;
      } catch (e) {
        return false;
      }
    }
    // (the inner href getter does not see searchParams changes; toString does)
    get href() { return this.#u.toString(); }
    set href(v) { this.#u.href = v; }
    get origin() {
      const p = this.#u.protocol;
      return specialSchemes.indexOf(p) >= 0 ? p + '//' + this.#u.host : 'null';
    }
    get protocol() { return this.#u.protocol; }
    set protocol(v) { this.#u.protocol = v; }
    get username() { return this.#u.username; }
    set username(v) { this.#u.username = v; }
    get password() { return this.#u.password; }
    set password(v) { this.#u.password = v; }
    get host() { return this.#u.host; }
    set host(v) { this.#u.host = v; }
    get hostname() { return this.#u.hostname; }
    set hostname(v) { this.#u.hostname = v; }
    get port() { return this.#u.port; }
    set port(v) { this.#u.port = v; }
    get pathname() { return this.#u.pathname; }
    set pathname(v) { this.#u.pathname = v; }
    get search() { return this.#u.search; }
    set search(v) { this.#u.search = v; }
    get searchParams() { return this.#u.searchParams; }
    get hash() { return this.#u.hash; }
    set hash(v) { this.#u.hash = v; }
    toString() { return this.#u.toString(); }
    toJSON() { return this.#u.toString(); }
  }
  define(URL.prototype, Symbol.toStringTag, 'URL');

  // goja names Go functions after their Go symbol; give the URLSearchParams
  // methods their JS names.
  function fixNames(o) {
    for (const k of ownKeys(o)) {
      if (typeof k !== 'string') continue;
      const d = getOwnPropertyDescriptor(o, k);
      for (const [f, prefix] of [[d.value, ''], [d.get, 'get '], [d.set, 'set ']]) {
        if (typeof f === 'function' && /[./]/.test(f.name)) {
          defineProperty(f, 'name', { value: prefix + k, configurable: true });
        }
      }
    }
  }
  defineProperty(USP, 'name', { value: 'URLSearchParams', configurable: true });
  fixNames(USP.prototype);
  fixNames(Object.getPrototypeOf(new USP().keys()));
  define(g, 'URL', URL);
  define(g, 'URLSearchParams', USP);

  // ---- fetch ---------------------------------------------------------------

  const tokenRE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
  const badValueRE = /[\0\r\n]/;
  function headerName(name) {
    name = String(name);
    if (!apply(test, tokenRE, [name])) throw new TypeErrorCtor('Headers: invalid header name "' + name + '"');
    return apply(toLower, name, []);
  }
  function headerValue(value) {
    value = apply(trim, String(value), []);
    if (apply(test, badValueRE, [value])) throw new TypeErrorCtor('Headers: header values cannot contain NUL, CR or LF');
    return value;
  }

  class Headers {
    #m = new MapCtor();
    constructor(init = undefined) {
      if (init === undefined || init === null) return;
      if (init instanceof Headers) {
        init.forEach((v, k) => this.append(k, v));
        return;
      }
      if (typeof init !== 'object') {
        throw new TypeErrorCtor('Headers: expected an object, an array of [name, value] pairs or a Headers');
      }
      if (isArray(init)) {
        for (const pair of init) {
          if (!isArray(pair) || pair.length !== 2) throw new TypeErrorCtor('Headers: each pair must be [name, value]');
          this.append(pair[0], pair[1]);
        }
        return;
      }
      for (const k of keys(init)) this.append(k, init[k]);
    }
    append(name, value) {
      name = headerName(name);
      value = headerValue(value);
      const l = this.#m.get(name);
      if (l) apply(push, l, [value]);
      else this.#m.set(name, [value]);
    }
    set(name, value) { this.#m.set(headerName(name), [headerValue(value)]); }
    get(name) {
      const l = this.#m.get(apply(toLower, String(name), []));
      return l ? apply(join, l, [', ']) : null;
    }
    has(name) { return this.#m.has(apply(toLower, String(name), [])); }
    delete(name) { this.#m.delete(apply(toLower, String(name), [])); }
    forEach(callback, thisArg = undefined) {
      for (const [k, v] of this.entries()) apply(callback, thisArg, [v, k, this]);
    }
    * entries() {
      const names = apply(sort, [...this.#m.keys()], []);
      for (const k of names) yield [k, apply(join, this.#m.get(k), [', '])];
    }
    * keys() { for (const [k] of this.entries()) yield k; }
    * values() { for (const [, v] of this.entries()) yield v; }
    [Symbol.iterator]() { return this.entries(); }
  }
  define(g, 'Headers', Headers);

  class Response {
    #status; #statusText; #url; #redirected; #headers; #body; #used = false;
    constructor(raw) {
      [this.#status, this.#statusText, this.#url, this.#redirected] = raw;
      this.#headers = new Headers(raw[4]);
      this.#body = raw[5];
    }
    get status() { return this.#status; }
    get statusText() { return this.#statusText; }
    get ok() { return this.#status >= 200 && this.#status < 300; }
    get url() { return this.#url; }
    get redirected() { return this.#redirected; }
    get headers() { return this.#headers; }
    get bodyUsed() { return this.#used; }
    #take() {
      if (this.#used) throw new TypeErrorCtor('Response: the body has already been read');
      this.#used = true;
      return this.#body;
    }
    async arrayBuffer() { return this.#take(); }
    async bytes() { return new U8(this.#take()); }
    async text() { return host.utf8Decode(new U8(this.#take()), false, false); }
    async json() { return parse(host.utf8Decode(new U8(this.#take()), false, false)); }
  }
  define(Response.prototype, Symbol.toStringTag, 'Response');

  const standardMethods = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT'];
  function fetch(input, init = undefined) {
    return new P((resolve, reject) => {
      const url = input instanceof URL ? input.href : String(input);
      let method = 'GET';
      let headers = new Headers();
      let body;
      if (init !== undefined && init !== null) {
        if (typeof init !== 'object') throw new TypeErrorCtor('fetch: init must be an object');
        if (init.method !== undefined) {
          method = String(init.method);
          const upper = apply(toUpper, method, []);
          if (standardMethods.indexOf(upper) >= 0) method = upper;
        }
        if (init.headers !== undefined) headers = new Headers(init.headers);
        const b = init.body;
        if (b !== undefined && b !== null) {
          if (method === 'GET' || method === 'HEAD') {
            throw new TypeErrorCtor('fetch: a ' + method + ' request cannot have a body');
          }
          let type;
          if (typeof b === 'string') {
            body = b;
            type = 'text/plain;charset=UTF-8';
          } else if (b instanceof AB || isView(b)) {
            body = bytesOf(b, 'fetch body');
          } else if (b instanceof USP) {
            body = String(b);
            type = 'application/x-www-form-urlencoded;charset=UTF-8';
          } else if (typeof b === 'object') {
            body = stringify(b);
            type = 'application/json';
          } else {
            body = String(b);
            type = 'text/plain;charset=UTF-8';
          }
          if (type !== undefined && !headers.has('content-type')) headers.set('content-type', type);
        }
      }
      const pairs = [...headers.entries()];
      apply(then, host.fetch(url, method, pairs, body), [(raw) => resolve(new Response(raw)), reject]);
    });
  }
  define(g, 'fetch', fetch);

  // brokerItems turns [key, json, key, json, …] into [{key, value}, …].
  function brokerItems(flat) {
    const out = [];
    for (let i = 0; i < flat.length; i += 2) out[i / 2] = { key: flat[i], value: parse(flat[i + 1]) };
    return out;
  }

  function makeError(kind, message) {
    return kind === 'TypeError' ? new TypeErrorCtor(message) : new ErrorCtor(message);
  }

  return { describeError, brokerItems, makeError, parse, stringify };
})
