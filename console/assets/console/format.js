// Formatting of times, durations and JSON for display.

const rtf = new Intl.RelativeTimeFormat("en", { numeric: "auto" });

// ago: "just now", "3 minutes ago", "in 2 hours". Each unit is used while
// the rounded number stays below the next ("in 1 hour", not "in 60
// minutes").
export function ago(iso, now = Date.now()) {
  if (!iso) return "—";
  const s = Math.round((new Date(iso).getTime() - now) / 1000);
  const abs = Math.abs(s);
  if (abs < 10) return "just now";
  if (abs < 60) return rtf.format(s, "second");
  if (Math.abs(Math.round(s / 60)) < 60) return rtf.format(Math.round(s / 60), "minute");
  if (Math.abs(Math.round(s / 3600)) < 48) return rtf.format(Math.round(s / 3600), "hour");
  return rtf.format(Math.round(s / 86400), "day");
}

// stamp: "2026-11-29 14:03:04" in local time, for exact moments.
export function stamp(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// clockMs: "14:03:04.123", for trace lines.
export function clockMs(iso) {
  const d = new Date(iso);
  const p = (n, w = 2) => String(n).padStart(w, "0");
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

// countdown: "4:59", "1:02:03", for a number of milliseconds left.
export function countdown(ms) {
  const t = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(t / 3600), m = Math.floor((t % 3600) / 60), s = t % 60;
  const p = (n) => String(n).padStart(2, "0");
  return h > 0 ? `${h}:${p(m)}:${p(s)}` : `${m}:${p(s)}`;
}

// pretty: indented JSON text of a value.
export function pretty(v) {
  if (v === undefined) return "";
  return JSON.stringify(v, null, 2);
}

export function bytes(n) {
  if (n < 1024) return n + " B";
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1024 / 1024).toFixed(1) + " MiB";
}

export function usd(n) {
  return "$" + (n || 0).toFixed(n && n < 0.01 ? 6 : 4);
}

// hasCosts: whether a costs object holds any usage.
export function hasCosts(c) {
  return !!c && (c.tokensInput > 0 || c.tokensOutput > 0 || c.costUsd > 0);
}

export function costsText(c) {
  return `${c.tokensInput} tokens in, ${c.tokensOutput} tokens out, ${usd(c.costUsd)}`;
}

// who names a decider or actor: the member's name when known (with the key
// id), the signed-in key as "you", Stead itself for an expiry.
export function who(id, me, name) {
  if (!id) return "—";
  if (me && id === me.id) return `you (${name ? name + ", " : ""}${id})`;
  if (id === "stead") return "Stead (timeout)";
  return name ? `${name} (${id})` : id;
}
